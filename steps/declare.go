package steps

import (
	"fmt"
	"sort"
	"strings"
)

// Option adjusts a step declaration made with Declare.
type Option func(*declaration)

type declaration struct {
	argsInfo        map[string]ArgInfo
	argsOrder       []string
	abortable       *bool
	requiresRamdisk *bool
}

// WithArgsInfo declares the arguments the step accepts (several
// WithArgsInfo and WithArg options add up). Every argument needs a
// non-empty description. A map has no order: these arguments are listed
// sorted, after those declared with WithArg.
func WithArgsInfo(info map[string]ArgInfo) Option {
	return func(d *declaration) {
		m := make(map[string]ArgInfo, len(d.argsInfo)+len(info))
		for k, v := range d.argsInfo {
			m[k] = v
		}
		for k, v := range info {
			m[k] = v
		}
		d.argsInfo = m
	}
}

// WithArg declares one argument the step accepts. Arguments declared with
// WithArg keep their declaration order, which Ironic's messages follow
// (missing required arguments are listed in it); it may be combined with
// WithArgsInfo, whose arguments come after, sorted.
func WithArg(name string, info ArgInfo) Option {
	return func(d *declaration) {
		m := make(map[string]ArgInfo, len(d.argsInfo)+1)
		for k, v := range d.argsInfo {
			m[k] = v
		}
		m[name] = info
		d.argsInfo = m
		if !containsString(d.argsOrder, name) {
			d.argsOrder = append(d.argsOrder, name)
		}
	}
}

// WithAbortable overrides the kind's default abortable flag (false for
// clean and service steps, true for deploy steps). Verify steps refuse it.
func WithAbortable(abortable bool) Option {
	return func(d *declaration) { d.abortable = &abortable }
}

// WithRequiresRamdisk overrides the default (true) for clean and service
// steps: a step that does not need the agent may run with the ramdisk
// disabled. Deploy and verify steps refuse it.
func WithRequiresRamdisk(requires bool) Option {
	return func(d *declaration) { d.requiresRamdisk = &requires }
}

// Declare builds the metadata of a step an interface implements, with the
// defaults of Ironic's decorators for the kind:
//
//	clean    abortable=false, requires_ramdisk=true, any priority
//	deploy   abortable=true, priority >= 0
//	service  abortable=false, requires_ramdisk=true, any priority (0 = manual only)
//	verify   priority >= 0, no arguments
//
// It refuses, with a *MetadataError, an unknown kind, an interface that
// contributes no steps of the kind, a name that is empty, not an
// identifier or reserved for the conductor, an out-of-range priority and
// invalid argsinfo.
func Declare(kind Kind, iface, name string, priority int, opts ...Option) (Step, error) {
	var d declaration
	for _, o := range opts {
		o(&d)
	}
	s := Step{Interface: iface, Name: name, Priority: priority}
	fail := func(field, problem string) (Step, error) {
		return Step{}, &MetadataError{Kind: kind, Interface: iface, Step: name, Field: field, Problem: problem}
	}
	switch kind {
	case Clean, Service:
		s.Abortable = false
		s.RequiresRamdisk = true
	case Deploy:
		s.Abortable = true
		if d.requiresRamdisk != nil {
			return fail("requires_ramdisk", "deploy steps do not declare requires_ramdisk")
		}
	case Verify:
		if d.abortable != nil {
			return fail("abortable", "verify steps do not declare abortable")
		}
		if d.requiresRamdisk != nil {
			return fail("requires_ramdisk", "verify steps do not declare requires_ramdisk")
		}
		if d.argsInfo != nil {
			return fail("argsinfo", "verify steps take no arguments")
		}
	}
	if d.abortable != nil {
		s.Abortable = *d.abortable
	}
	if d.requiresRamdisk != nil {
		s.RequiresRamdisk = *d.requiresRamdisk
	}
	if d.argsInfo != nil {
		s.ArgsInfo = make(map[string]ArgInfo, len(d.argsInfo))
		for k, v := range d.argsInfo {
			s.ArgsInfo[k] = v
		}
		s.ArgsOrder = append([]string(nil), d.argsOrder...)
	}
	if err := Check(kind, s); err != nil {
		return Step{}, err
	}
	return s, nil
}

// MustDeclare is Declare for static declarations: it panics on invalid
// metadata, which is a programming mistake.
func MustDeclare(kind Kind, iface, name string, priority int, opts ...Option) Step {
	s, err := Declare(kind, iface, name, priority, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// Check validates step metadata that was built elsewhere (for example
// decoded from a driver plugin's description) with the rules of Declare.
// Defaults are not applied. It returns nil or a *MetadataError.
func Check(kind Kind, s Step) error {
	fail := func(field, problem string) error {
		return &MetadataError{Kind: kind, Interface: s.Interface, Step: s.Name, Field: field, Problem: problem}
	}
	if !kind.Valid() {
		return fail("kind", "want one of clean, deploy, service, verify")
	}
	if _, ok := kind.InterfacePriority(s.Interface); !ok {
		return fail("interface", fmt.Sprintf("interface %q contributes no %s steps; want one of %s",
			s.Interface, kind, strings.Join(kind.Interfaces(), ", ")))
	}
	if !isIdentifier(s.Name) {
		return fail("step", "want a non-empty identifier of letters, digits and underscores")
	}
	if IsReservedName(s.Name) {
		return fail("step", "the name is reserved for steps the conductor runs itself")
	}
	if (kind == Deploy || kind == Verify) && s.Priority < 0 {
		return fail("priority", fmt.Sprintf("%s step priority must be >= 0, got %d", kind, s.Priority))
	}
	if kind == Verify && len(s.ArgsInfo) > 0 {
		return fail("argsinfo", "verify steps take no arguments")
	}
	if kind == Deploy && s.RequiresRamdisk {
		return fail("requires_ramdisk", "deploy steps do not declare requires_ramdisk")
	}
	names := make([]string, 0, len(s.ArgsInfo))
	for n := range s.ArgsInfo {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "" {
			return fail("argsinfo", "argument names must not be empty")
		}
		if s.ArgsInfo[n].Description == "" {
			return fail("argsinfo."+n, "a description is required")
		}
	}
	return nil
}

// ParseArgsInfo converts argsinfo decoded from JSON (a map of argument
// name to {"description": string, "required": bool}) into typed form,
// refusing what Ironic's decorators refuse: a non-object value, a missing
// or non-string description, a non-bool required and any other key. kind,
// iface and name only label the error.
func ParseArgsInfo(kind Kind, iface, name string, raw any) (map[string]ArgInfo, error) {
	fail := func(field, problem string) error {
		return &MetadataError{Kind: kind, Interface: iface, Step: name, Field: field, Problem: problem}
	}
	if raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fail("argsinfo", fmt.Sprintf("want an object, got %s", jsonTypeName(raw)))
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]ArgInfo, len(m))
	for _, n := range names {
		field := "argsinfo." + n
		info, ok := m[n].(map[string]any)
		if !ok {
			return nil, fail(field, fmt.Sprintf("want an object, got %s", jsonTypeName(m[n])))
		}
		var ai ArgInfo
		keys := make([]string, 0, len(info))
		for k := range info {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch k {
			case "description", "required":
			default:
				return nil, fail(field, fmt.Sprintf("unexpected key %q; only description and required are allowed", k))
			}
		}
		d, present := info["description"]
		if !present {
			return nil, fail(field, "description is required")
		}
		ds, ok := d.(string)
		if !ok {
			return nil, fail(field, fmt.Sprintf("description must be a string, got %s", jsonTypeName(d)))
		}
		ai.Description = ds
		if r, present := info["required"]; present {
			rb, ok := r.(bool)
			if !ok {
				return nil, fail(field, fmt.Sprintf("required must be a boolean, got %s", jsonTypeName(r)))
			}
			ai.Required = rb
		}
		out[n] = ai
	}
	return out, nil
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, int, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
