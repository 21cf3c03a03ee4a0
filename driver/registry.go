package driver

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// Config says which hardware types and implementations are enabled, with
// the meaning of Ironic's enabled_* and default_*_interface options.
type Config struct {
	// EnabledHardwareTypes lists the enabled hardware types
	// (enabled_hardware_types). At least one is required.
	EnabledHardwareTypes []string
	// EnabledInterfaces lists the enabled implementations per kind
	// (enabled_<kind>_interfaces). A kind with an empty list is computed:
	// for every enabled hardware type, its first supported implementation
	// that is registered, de-duplicated; except console, whose computed
	// list is no-console alone (Ironic's enabled_console_interfaces
	// default): a console runs a program and listens on a TCP port of the
	// conductor host for every node, so it is enabled by name, never by
	// being registered.
	EnabledInterfaces map[Kind][]string
	// DefaultInterfaces overrides the computed default implementation per
	// kind (default_<kind>_interface). It must be enabled and supported by
	// the node's hardware type.
	DefaultInterfaces map[Kind]string
}

// Enabled is the effective configuration: enabled hardware types and the
// enabled implementation names per kind (computed lists filled in).
type Enabled struct {
	HardwareTypes []string
	Interfaces    map[Kind][]string
}

// NodeInterfaces is what Resolve and FillDefaults need from a node.
type NodeInterfaces struct {
	// Node identifies the node in error messages (UUID or name).
	Node string
	// HardwareType is the node's driver field.
	HardwareType string
	// Interfaces holds the node's <kind>_interface fields; empty or absent
	// means "use the default".
	Interfaces map[Kind]string
	// InstanceInfo is the node's instance_info; a string value under
	// "<kind>_interface" overrides the node field for this deployment.
	InstanceInfo map[string]any
}

type registered struct {
	impl   Interface
	source string
}

// Registry holds hardware types and implementations, built-in and from
// plugins side by side, and composes drivers for nodes. It is a value the
// embedder builds; there is no global registry. A Registry is safe for
// concurrent use; registrations may happen while nodes are resolved.
type Registry struct {
	mu       sync.RWMutex
	cfg      Config
	warnings []ConfigWarning
	hw       map[string]HardwareType
	hwSrc    map[string]string
	impls    map[Kind]map[string]registered
}

// NewRegistry returns an empty registry using cfg. Register the built-ins
// with r.Register(builtin.Bundle(...)) and plugins with the plugin host.
func NewRegistry(cfg Config) *Registry {
	c := Config{
		EnabledHardwareTypes: slices.Clone(cfg.EnabledHardwareTypes),
		EnabledInterfaces:    map[Kind][]string{},
		DefaultInterfaces:    map[Kind]string{},
	}
	for k, v := range cfg.EnabledInterfaces {
		c.EnabledInterfaces[k] = dedupe(v)
	}
	maps.Copy(c.DefaultInterfaces, cfg.DefaultInterfaces)
	c.EnabledHardwareTypes = dedupe(c.EnabledHardwareTypes)
	return &Registry{cfg: c, warnings: cfg.Warnings(), hw: map[string]HardwareType{}, hwSrc: map[string]string{}, impls: map[Kind]map[string]registered{}}
}

// ConfigWarning is a harmless mistake in a Config: a name listed more than
// once, or an empty name, in an enabled list. The registry ignores the
// extra entries; the embedder should log the warning at start.
type ConfigWarning struct {
	// Setting is the Ironic option: "enabled_hardware_types" or
	// "enabled_<kind>_interfaces".
	Setting string
	// Name is the repeated name ("" for empty entries).
	Name string
	// Count is how many times Name appears.
	Count int
}

func (w ConfigWarning) String() string {
	if w.Name == "" {
		return fmt.Sprintf("driver: %s has %d empty name(s); they are ignored", w.Setting, w.Count)
	}
	return fmt.Sprintf("driver: %s lists %q %d times; the duplicates are ignored", w.Setting, w.Name, w.Count)
}

// Warnings returns c's duplicate and empty entries in the enabled lists,
// hardware types first, then the kinds in Kinds order, each list in
// order of first appearance. Nil means none.
func (c Config) Warnings() []ConfigWarning {
	var out []ConfigWarning
	check := func(setting string, names []string) {
		counts := map[string]int{}
		var order []string
		for _, n := range names {
			if counts[n] == 0 {
				order = append(order, n)
			}
			counts[n]++
		}
		for _, n := range order {
			if counts[n] > 1 || n == "" {
				out = append(out, ConfigWarning{Setting: setting, Name: n, Count: counts[n]})
			}
		}
	}
	check("enabled_hardware_types", c.EnabledHardwareTypes)
	for _, k := range Kinds() {
		check("enabled_"+string(k)+"_interfaces", c.EnabledInterfaces[k])
	}
	return out
}

// Warnings returns the Config.Warnings of the configuration the registry
// was built with.
func (r *Registry) Warnings() []ConfigWarning { return slices.Clone(r.warnings) }

// MustRegisterHardwareType is RegisterHardwareType for start-up code: a
// registration mistake (empty or duplicate name, malformed hardware type)
// is a programming error, so it panics with an error naming the mistake.
func (r *Registry) MustRegisterHardwareType(h HardwareType) {
	if err := r.RegisterHardwareType(h); err != nil {
		panic(fmt.Errorf("driver: MustRegisterHardwareType: %w", err))
	}
}

// MustRegisterInterface is RegisterInterface for start-up code: it panics
// on an unknown kind, an empty or duplicate name, or a nil implementation
// or one that does not implement kind's interface.
func (r *Registry) MustRegisterInterface(kind Kind, name string, impl Interface) {
	if err := r.RegisterInterface(kind, name, impl); err != nil {
		panic(fmt.Errorf("driver: MustRegisterInterface: %w", err))
	}
}

// MustRegister is Register for start-up code (typically
// r.MustRegister(builtin.Bundle(cfg))): it panics with the joined errors
// when anything in b cannot be registered.
func (r *Registry) MustRegister(b Bundle) {
	if err := r.Register(b); err != nil {
		panic(fmt.Errorf("driver: MustRegister: %w", err))
	}
}

// isNil reports whether impl is nil or a typed nil (a nil pointer, map,
// slice, func or channel in an interface).
func isNil(impl Interface) bool {
	if impl == nil {
		return true
	}
	switch v := reflect.ValueOf(impl); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// RegisterHardwareType adds a hardware type. It fails with ErrDuplicate
// when the name is taken and ErrInvalidParameter when h is malformed.
func (r *Registry) RegisterHardwareType(h HardwareType) error {
	return r.registerHardwareType(h, "builtin")
}

func (r *Registry) registerHardwareType(h HardwareType, source string) error {
	if err := h.Check(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.hw[h.Name]; ok {
		return fmt.Errorf("driver: hardware type %q from %s: %w by %s", h.Name, source, ErrDuplicate, r.hwSrc[h.Name])
	}
	r.hw[h.Name] = h.clone()
	r.hwSrc[h.Name] = source
	return nil
}

// RegisterInterface adds the implementation impl of kind under name. It
// fails with ErrInvalidParameter when kind is unknown, name is empty or
// impl does not implement kind's interface, and ErrDuplicate when the
// name is taken for kind.
func (r *Registry) RegisterInterface(kind Kind, name string, impl Interface) error {
	return r.registerInterface(kind, name, impl, "builtin")
}

func (r *Registry) registerInterface(kind Kind, name string, impl Interface, source string) error {
	switch {
	case !kind.Valid():
		return fmt.Errorf("driver: %w: unknown interface kind %q for %q", ErrInvalidParameter, kind, name)
	case name == "":
		return fmt.Errorf("driver: %w: empty %s implementation name", ErrInvalidParameter, kind)
	case isNil(impl):
		return fmt.Errorf("driver: %w: %s/%s has a nil implementation (%T)", ErrInvalidParameter, kind, name, impl)
	case !kindMatches(kind, impl):
		return fmt.Errorf("driver: %w: %s/%s (%T) does not implement the %s interface", ErrInvalidParameter, kind, name, impl, kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.impls[kind]
	if m == nil {
		m = map[string]registered{}
		r.impls[kind] = m
	}
	if prev, ok := m[name]; ok {
		return fmt.Errorf("driver: %s/%s from %s: %w by %s", kind, name, source, ErrDuplicate, prev.source)
	}
	m[name] = registered{impl: impl, source: source}
	return nil
}

// Register adds everything in b, attributing it to source in error
// messages ("builtin", a plugin path). It registers what it can and
// returns the joined errors for the rest.
func (r *Registry) Register(b Bundle) error { return r.RegisterFrom("builtin", b) }

// RegisterFrom is Register with an explicit source name.
func (r *Registry) RegisterFrom(source string, b Bundle) error {
	var errs []error
	for _, h := range b.HardwareTypes {
		errs = append(errs, r.registerHardwareType(h, source))
	}
	for _, i := range b.Implementations {
		errs = append(errs, r.registerInterface(i.Kind, i.Name, i.Impl, source))
	}
	return errors.Join(errs...)
}

// HardwareType returns the registered hardware type called name.
func (r *Registry) HardwareType(name string) (HardwareType, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.hw[name]
	if !ok {
		return HardwareType{}, false
	}
	return h.clone(), true
}

// HardwareTypes returns the names of all registered hardware types, sorted.
func (r *Registry) HardwareTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.hw))
}

// Implementations returns the names of all registered implementations of
// kind, sorted.
func (r *Registry) Implementations(kind Kind) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.impls[kind]))
}

// Interface returns the registered implementation of kind called name,
// enabled or not.
func (r *Registry) Interface(kind Kind, name string) (Interface, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.impls[kind][name]
	return reg.impl, ok
}

// Source returns where the implementation of kind called name came from
// ("builtin" or a plugin's source name).
func (r *Registry) Source(kind Kind, name string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.impls[kind][name]
	return reg.source, ok
}

// Enabled returns the effective configuration, computing empty enabled
// lists from the enabled hardware types (Ironic's rule: the first
// supported implementation of each enabled hardware type; no-console for
// console, see Config.EnabledInterfaces).
func (r *Registry) Enabled() Enabled {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.enabledLocked()
}

func (r *Registry) enabledLocked() Enabled {
	e := Enabled{HardwareTypes: slices.Clone(r.cfg.EnabledHardwareTypes), Interfaces: map[Kind][]string{}}
	for _, k := range Kinds() {
		if v := r.cfg.EnabledInterfaces[k]; len(v) > 0 {
			e.Interfaces[k] = slices.Clone(v)
			continue
		}
		var computed []string
		if k == KindConsole {
			if _, ok := r.impls[k][NoConsole]; ok {
				computed = []string{NoConsole}
			}
			e.Interfaces[k] = computed
			continue
		}
		for _, hn := range r.cfg.EnabledHardwareTypes {
			h, ok := r.hw[hn]
			if !ok {
				continue
			}
			for _, name := range h.SupportedFor(k) {
				if _, ok := r.impls[k][name]; ok {
					if !slices.Contains(computed, name) {
						computed = append(computed, name)
					}
					break
				}
			}
		}
		e.Interfaces[k] = computed
	}
	return e
}

// Check verifies the configuration against what is registered, as Ironic
// does at conductor start: at least one hardware type enabled
// (ErrNoHardwareTypes), every enabled name registered
// (*HardwareTypeNotFoundError, *InterfaceNotFoundError listing the
// registered names) and every configured default enabled. It returns the
// joined errors.
func (r *Registry) Check() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.cfg.EnabledHardwareTypes) == 0 {
		return fmt.Errorf("driver: %w: set Config.EnabledHardwareTypes (registered: %s)", ErrNoHardwareTypes, quoteList(slices.Sorted(maps.Keys(r.hw))))
	}
	var errs []error
	for _, hn := range r.cfg.EnabledHardwareTypes {
		if _, ok := r.hw[hn]; !ok {
			errs = append(errs, &HardwareTypeNotFoundError{Name: hn, Enabled: slices.Sorted(maps.Keys(r.hw))})
		}
	}
	e := r.enabledLocked()
	for _, k := range Kinds() {
		registeredNames := slices.Sorted(maps.Keys(r.impls[k]))
		for _, name := range e.Interfaces[k] {
			if _, ok := r.impls[k][name]; !ok {
				errs = append(errs, &InterfaceNotFoundError{Kind: k, Name: name, Valid: registeredNames})
			}
		}
		if d := r.cfg.DefaultInterfaces[k]; d != "" && !slices.Contains(e.Interfaces[k], d) {
			errs = append(errs, fmt.Errorf("driver: %w: default %s interface %q is not enabled (enabled: %s)",
				ErrInvalidParameter, k, d, quoteList(e.Interfaces[k])))
		}
	}
	return errors.Join(errs...)
}

// DefaultInterface returns the default implementation of kind for hardware
// type hwType: the configured default when set (it must be enabled and
// compatible), otherwise the first supported implementation that is
// enabled. It fails with *HardwareTypeNotFoundError or *NoValidDefaultError.
func (r *Registry) DefaultInterface(hwType string, kind Kind) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, err := r.hardwareTypeLocked(hwType)
	if err != nil {
		return "", err
	}
	return r.defaultLocked(h, kind, r.enabledLocked(), "")
}

func (r *Registry) hardwareTypeLocked(name string) (HardwareType, error) {
	h, ok := r.hw[name]
	enabled := slices.Contains(r.cfg.EnabledHardwareTypes, name)
	if !ok || !enabled {
		return HardwareType{}, &HardwareTypeNotFoundError{Name: name, Registered: ok, Enabled: slices.Clone(r.cfg.EnabledHardwareTypes)}
	}
	return h, nil
}

func (r *Registry) defaultLocked(h HardwareType, kind Kind, e Enabled, node string) (string, error) {
	nve := &NoValidDefaultError{HardwareType: h.Name, Kind: kind, Node: node, Supported: h.SupportedFor(kind), Enabled: e.Interfaces[kind]}
	if d := r.cfg.DefaultInterfaces[kind]; d != "" {
		if err := r.checkNameLocked(h, kind, d, e); err != nil {
			nve.Configured, nve.Cause = d, err
			return "", nve
		}
		return d, nil
	}
	for _, name := range h.SupportedFor(kind) {
		if slices.Contains(e.Interfaces[kind], name) {
			if _, ok := r.impls[kind][name]; ok {
				return name, nil
			}
		}
	}
	return "", nve
}

// checkNameLocked validates that name is an enabled, registered
// implementation of kind compatible with h.
func (r *Registry) checkNameLocked(h HardwareType, kind Kind, name string, e Enabled) error {
	_, registeredOK := r.impls[kind][name]
	if !registeredOK || !slices.Contains(e.Interfaces[kind], name) {
		var valid []string
		for _, n := range e.Interfaces[kind] {
			if _, ok := r.impls[kind][n]; ok {
				valid = append(valid, n)
			}
		}
		return &InterfaceNotFoundError{Kind: kind, Name: name, Registered: registeredOK, Valid: valid}
	}
	if !h.SkipCompatibilityCheck && !h.Supports(kind, name) {
		return &IncompatibleInterfaceError{HardwareType: h.Name, Kind: kind, Name: name, Supported: h.SupportedFor(kind)}
	}
	return nil
}

// FillDefaults is Ironic's check_and_update_node_interfaces: it validates
// every interface the node names (instance_info overrides and node fields)
// and returns the node's interface fields with each unset kind filled with
// its default, to be persisted when the node is created or updated. The
// returned map holds all 13 kinds. Errors for several kinds are joined.
func (r *Registry) FillDefaults(n NodeInterfaces) (map[Kind]string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, err := r.hardwareTypeLocked(n.HardwareType)
	if err != nil {
		return nil, err
	}
	e := r.enabledLocked()
	out := make(map[Kind]string, len(Kinds()))
	var errs []error
	for _, k := range Kinds() {
		if o, ok := instanceOverride(n.InstanceInfo, k); ok {
			if err := r.checkNameLocked(h, k, o, e); err != nil {
				errs = append(errs, fmt.Errorf("instance_info[%q]: %w", k.NodeField(), err))
			}
		}
		if name := n.Interfaces[k]; name != "" {
			if err := r.checkNameLocked(h, k, name, e); err != nil {
				errs = append(errs, err)
			}
			out[k] = name
			continue
		}
		d, err := r.defaultLocked(h, k, e, n.Node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[k] = d
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Resolve composes the driver for a node: for each kind the instance_info
// override, else the node field, else the default, each checked to be
// enabled and supported by the node's hardware type (fake-hardware style
// types skip the support check). It fails with *HardwareTypeNotFoundError,
// or the joined *InterfaceNotFoundError, *IncompatibleInterfaceError and
// *NoValidDefaultError of every failing kind.
func (r *Registry) Resolve(n NodeInterfaces) (*Driver, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, err := r.hardwareTypeLocked(n.HardwareType)
	if err != nil {
		return nil, err
	}
	e := r.enabledLocked()
	d := &Driver{HardwareType: h.Name, Names: make(map[Kind]string, 13), impls: make(map[Kind]Interface, 13)}
	var errs []error
	for _, k := range Kinds() {
		name, fromInstance := instanceOverride(n.InstanceInfo, k)
		if !fromInstance {
			name = n.Interfaces[k]
		}
		if name == "" {
			def, err := r.defaultLocked(h, k, e, n.Node)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			name = def
		} else if err := r.checkNameLocked(h, k, name, e); err != nil {
			if fromInstance {
				err = fmt.Errorf("instance_info[%q]: %w", k.NodeField(), err)
			}
			errs = append(errs, err)
			continue
		}
		d.Names[k] = name
		d.impls[k] = r.impls[k][name].impl
	}
	if err := errors.Join(errs...); err != nil {
		if n.Node != "" {
			return nil, fmt.Errorf("driver: node %s: %w", n.Node, err)
		}
		return nil, err
	}
	return d, nil
}

func instanceOverride(ii map[string]any, k Kind) (string, bool) {
	v, ok := ii[k.NodeField()].(string)
	return v, ok && v != ""
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
