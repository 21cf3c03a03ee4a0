package rfdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"

	"github.com/anvilmetal/anvil/driver"
	"github.com/stmcginnis/gofish/redfish"
)

// ErrUnsupported is wrapped when the BMC does not offer what was asked
// (a reset type, a boot target, virtual media, a storage controller).
var ErrUnsupported = errors.New("not supported by the BMC")

// ErrNotFound is wrapped when a resource the request names does not exist.
var ErrNotFound = errors.New("not found")

// System is one ComputerSystem reached through a Conn, bound to a caller's
// context. The ComputerSystem itself is decoded tolerantly (a generic map
// with typed getters) so that one malformed vendor field cannot make power
// control fail; resources with well-behaved schemas go through gofish.
type System struct {
	conn *Conn
	cl   common.Client
	uri  string
	uuid string // the UUID the system reported when it was resolved
}

// ErrSystemSelection is wrapped when a node's system cannot be told apart
// on its BMC: redfish_system_id names no system there, or it is unset and
// the BMC manages several.
var ErrSystemSelection = errors.New("cannot select the node's system")

// SystemSelectionError says which system was asked for (empty: none) on
// which BMC, and which the BMC has. It matches ErrSystemSelection and
// driver.ErrInvalidParameter.
type SystemSelectionError struct {
	Endpoint string
	SystemID string   // as configured in redfish_system_id; empty when unset
	Members  []string // the BMC's systems
}

func (e *SystemSelectionError) Error() string {
	if e.SystemID == "" {
		return fmt.Sprintf("redfish: %s manages %d systems (%s): set redfish_system_id to one of them", e.Endpoint, len(e.Members), strings.Join(e.Members, ", "))
	}
	return fmt.Sprintf("redfish: %s has no system %q; it manages %s", e.Endpoint, e.SystemID, strings.Join(e.Members, ", "))
}

// Is matches ErrSystemSelection and driver.ErrInvalidParameter.
func (e *SystemSelectionError) Is(target error) bool {
	return target == ErrSystemSelection || target == driver.ErrInvalidParameter
}

// System resolves a node's ComputerSystem on the connection's BMC:
// systemID is the node's redfish_system_id, a resource path or an Id; when
// empty, the BMC must manage exactly one system. The system is resolved
// for every call (the connection is shared by every node on the BMC, and
// never remembers one node's system for another), read once to prove it
// exists, and its UUID is kept for the caller's identity check.
func (c *Conn) System(ctx context.Context, systemID string) (*System, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl := c.Client(ctx)
	uri := ""
	switch {
	case strings.HasPrefix(systemID, "/"):
		uri = systemID
	case systemID == "":
		c.sysMu.Lock()
		uri = c.systemURI
		c.sysMu.Unlock()
	}
	var members []string
	if uri == "" {
		coll, err := getJSON(cl, "/redfish/v1/Systems")
		if err != nil {
			return nil, err
		}
		members = links(coll, "Members")
		if systemID == "" {
			if len(members) != 1 {
				return nil, &SystemSelectionError{Endpoint: c.info.Endpoint, Members: members}
			}
			uri = members[0]
			c.sysMu.Lock()
			c.systemURI = uri
			c.sysMu.Unlock()
		} else {
			for _, m := range members {
				if path.Base(m) == systemID {
					uri = m
				}
			}
			if uri == "" {
				return nil, &SystemSelectionError{Endpoint: c.info.Endpoint, SystemID: systemID, Members: members}
			}
		}
	}
	sys := &System{conn: c, cl: cl, uri: uri}
	m, err := sys.Raw()
	if errors.Is(err, ErrNotFound) {
		if members == nil {
			if coll, cerr := getJSON(cl, "/redfish/v1/Systems"); cerr == nil {
				members = links(coll, "Members")
			}
		}
		if systemID == "" {
			// The only system went away; forget it.
			c.sysMu.Lock()
			c.systemURI = ""
			c.sysMu.Unlock()
		}
		return nil, fmt.Errorf("%w: %w", &SystemSelectionError{Endpoint: c.info.Endpoint, SystemID: cmp.Or(systemID, uri), Members: members}, err)
	}
	if err != nil {
		return nil, err
	}
	sys.uuid = getString(m, "UUID")
	return sys, nil
}

// UUID is the UUID the system reported when it was resolved, or "".
func (s *System) UUID() string { return s.uuid }

// URI is the ComputerSystem's path.
func (s *System) URI() string { return s.uri }

// Raw fetches the ComputerSystem as a generic map.
func (s *System) Raw() (map[string]any, error) {
	m, err := getJSON(s.cl, s.uri)
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return nil, fmt.Errorf("redfish: system %s on %s: %w: %w", s.uri, s.conn.info.Endpoint, ErrNotFound, err)
	}
	return m, err
}

// PowerState returns the Redfish PowerState (On, Off, PoweringOn,
// PoweringOff, Paused) of the system.
func (s *System) PowerState() (string, error) {
	m, err := s.Raw()
	if err != nil {
		return "", err
	}
	ps := getString(m, "PowerState")
	if ps == "" {
		return "", fmt.Errorf("redfish: system %s reports no PowerState: %w", s.uri, ErrUnsupported)
	}
	return ps, nil
}

// Health returns the system's Status.Health and Status.HealthRollup
// (Redfish's OK, Warning or Critical; "" when the service does not say).
func (s *System) Health() (health, rollup string, err error) {
	m, err := s.Raw()
	if err != nil {
		return "", "", err
	}
	st := getMap(m, "Status")
	return getString(st, "Health"), getString(st, "HealthRollup"), nil
}

// ResetTypes returns the reset types the system advertises; an empty list
// means the BMC did not say.
func (s *System) ResetTypes() ([]string, string, error) {
	m, err := s.Raw()
	if err != nil {
		return nil, "", err
	}
	act := getMap(getMap(m, "Actions"), "#ComputerSystem.Reset")
	target := getString(act, "target")
	if target == "" {
		return nil, "", fmt.Errorf("redfish: system %s has no ComputerSystem.Reset action: %w", s.uri, ErrUnsupported)
	}
	return getStrings(act, "ResetType@Redfish.AllowableValues"), target, nil
}

// Reset posts the first of the preferred reset types the system
// advertises (any of them when it advertises none) and returns the one
// used.
func (s *System) Reset(preferred ...string) (string, error) {
	allowed, target, err := s.ResetTypes()
	if err != nil {
		return "", err
	}
	chosen := ""
	for _, p := range preferred {
		if len(allowed) == 0 || slices.Contains(allowed, p) {
			chosen = p
			break
		}
	}
	if chosen == "" {
		return "", fmt.Errorf("redfish: system %s offers reset types %v, none of %v: %w", s.uri, allowed, preferred, ErrUnsupported)
	}
	resp, err := s.cl.Post(target, map[string]string{"ResetType": chosen})
	if err != nil {
		return "", err
	}
	drain(resp)
	return chosen, nil
}

// BootOverride is the system's boot source override.
type BootOverride struct {
	Target  string // Pxe, Hdd, Cd, BiosSetup, ...
	Enabled string // Once, Continuous, Disabled
	Mode    string // UEFI or Legacy; empty when not reported
	Allowed []string
}

// Boot reads the boot override.
func (s *System) Boot() (BootOverride, error) {
	m, err := s.Raw()
	if err != nil {
		return BootOverride{}, err
	}
	b := getMap(m, "Boot")
	return BootOverride{
		Target: getString(b, "BootSourceOverrideTarget"), Enabled: getString(b, "BootSourceOverrideEnabled"),
		Mode: getString(b, "BootSourceOverrideMode"), Allowed: getStrings(b, "BootSourceOverrideTarget@Redfish.AllowableValues"),
	}, nil
}

// SetBoot patches the boot override. Empty fields are left unchanged.
func (s *System) SetBoot(target, enabled, mode string) error {
	if target != "" {
		cur, err := s.Boot()
		if err != nil {
			return err
		}
		if len(cur.Allowed) > 0 && !slices.Contains(cur.Allowed, target) {
			return fmt.Errorf("redfish: system %s offers boot targets %v, not %q: %w", s.uri, cur.Allowed, target, ErrUnsupported)
		}
	}
	boot := map[string]string{}
	if target != "" {
		boot["BootSourceOverrideTarget"] = target
	}
	if enabled != "" {
		boot["BootSourceOverrideEnabled"] = enabled
	}
	if mode != "" {
		boot["BootSourceOverrideMode"] = mode
	}
	return s.patch(s.uri, map[string]any{"Boot": boot})
}

// Indicator returns the IndicatorLED value (Lit, Blinking, Off), falling
// back to LocationIndicatorActive on newer services.
func (s *System) Indicator() (string, error) {
	m, err := s.Raw()
	if err != nil {
		return "", err
	}
	if v := getString(m, "IndicatorLED"); v != "" {
		return v, nil
	}
	if v, ok := m["LocationIndicatorActive"].(bool); ok {
		if v {
			return "Lit", nil
		}
		return "Off", nil
	}
	return "", fmt.Errorf("redfish: system %s reports no indicator: %w", s.uri, ErrUnsupported)
}

// SetIndicator sets IndicatorLED to Lit, Blinking or Off. A service that
// has only LocationIndicatorActive (Redfish 2020.3 and later) gets that
// property instead: Lit is true, Off false, and Blinking is unsupported.
func (s *System) SetIndicator(state string) error {
	m, err := s.Raw()
	if err != nil {
		return err
	}
	if _, led := m["IndicatorLED"]; !led {
		if _, ok := m["LocationIndicatorActive"].(bool); ok {
			if state == "Blinking" {
				return fmt.Errorf("redfish: system %s has LocationIndicatorActive, which cannot blink: %w", s.uri, ErrUnsupported)
			}
			return s.patch(s.uri, map[string]any{"LocationIndicatorActive": state == "Lit"})
		}
	}
	return s.patch(s.uri, map[string]any{"IndicatorLED": state})
}

func (s *System) patch(uri string, body any) error {
	resp, err := s.cl.Patch(uri, body)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// SecureBoot returns the SecureBoot resource through gofish.
func (s *System) SecureBoot() (*redfish.SecureBoot, error) {
	m, err := s.Raw()
	if err != nil {
		return nil, err
	}
	uri := link(m, "SecureBoot")
	if uri == "" {
		return nil, fmt.Errorf("redfish: system %s has no SecureBoot resource: %w", s.uri, ErrUnsupported)
	}
	return redfish.GetSecureBoot(s.cl, uri)
}

// SetSecureBoot enables or disables UEFI secure boot.
func (s *System) SetSecureBoot(enabled bool) error {
	sb, err := s.SecureBoot()
	if err != nil {
		return err
	}
	return s.patch(sb.ODataID, map[string]any{"SecureBootEnable": enabled})
}

// ManagerModel is the Model of the first manager (BMC) that manages the
// system, or "" when the service names none.
func (s *System) ManagerModel() (string, error) {
	m, err := s.Raw()
	if err != nil {
		return "", err
	}
	mgrs := links(getMap(m, "Links"), "ManagedBy")
	if len(mgrs) == 0 {
		return "", nil
	}
	mm, err := getJSON(s.cl, mgrs[0])
	if err != nil {
		return "", err
	}
	return getString(mm, "Model"), nil
}

// VirtualMedia lists the system's virtual media devices, or those of the
// manager when the system has none (older services).
func (s *System) VirtualMedia() ([]*redfish.VirtualMedia, error) {
	m, err := s.Raw()
	if err != nil {
		return nil, err
	}
	if uri := link(m, "VirtualMedia"); uri != "" {
		return redfish.ListReferencedVirtualMedias(s.cl, uri)
	}
	for _, mgr := range links(getMap(m, "Links"), "ManagedBy") {
		mm, err := getJSON(s.cl, mgr)
		if err != nil {
			return nil, err
		}
		if uri := link(mm, "VirtualMedia"); uri != "" {
			return redfish.ListReferencedVirtualMedias(s.cl, uri)
		}
	}
	return nil, fmt.Errorf("redfish: system %s has no virtual media: %w", s.uri, ErrUnsupported)
}

// InsertCD puts image into the first CD/DVD device, ejecting what it held,
// and returns the device's URI.
func (s *System) InsertCD(image string) (string, error) {
	vm, err := s.findCD()
	if err != nil {
		return "", err
	}
	if vm.Inserted {
		if err := vm.EjectMedia(); err != nil {
			return "", fmt.Errorf("redfish: eject %s before insert: %w", vm.ODataID, err)
		}
	}
	if err := vm.InsertMedia(image, true, true); err != nil {
		return "", fmt.Errorf("redfish: insert media into %s: %w", vm.ODataID, err)
	}
	return vm.ODataID, nil
}

// EjectCD ejects every CD/DVD device holding media. Ejecting an empty
// device is a no-op.
func (s *System) EjectCD() error {
	all, err := s.VirtualMedia()
	if err != nil {
		return err
	}
	for _, vm := range all {
		if isCD(vm) && vm.Inserted {
			if err := vm.EjectMedia(); err != nil {
				return fmt.Errorf("redfish: eject %s: %w", vm.ODataID, err)
			}
		}
	}
	return nil
}

func (s *System) findCD() (*redfish.VirtualMedia, error) {
	all, err := s.VirtualMedia()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b *redfish.VirtualMedia) int { return strings.Compare(a.ODataID, b.ODataID) })
	for _, vm := range all {
		if isCD(vm) && vm.SupportsMediaInsert {
			return vm, nil
		}
	}
	return nil, fmt.Errorf("redfish: system %s has no CD/DVD virtual media that accepts InsertMedia: %w", s.uri, ErrUnsupported)
}

func isCD(vm *redfish.VirtualMedia) bool {
	for _, t := range vm.MediaTypes {
		if t == redfish.CDMediaType || t == redfish.DVDMediaType {
			return true
		}
	}
	return false
}

// InsertRemovable puts image into the first virtual USB stick or floppy
// device that accepts InsertMedia (where Ironic puts its configuration
// floppy), ejecting what it held, and returns the device's URI.
func (s *System) InsertRemovable(image string) (string, error) {
	all, err := s.VirtualMedia()
	if err != nil {
		return "", err
	}
	slices.SortFunc(all, func(a, b *redfish.VirtualMedia) int { return strings.Compare(a.ODataID, b.ODataID) })
	for _, vm := range all {
		if !vm.SupportsMediaInsert || isCD(vm) || !(slices.Contains(vm.MediaTypes, redfish.USBStickMediaType) || slices.Contains(vm.MediaTypes, redfish.FloppyMediaType)) {
			continue
		}
		if vm.Inserted {
			if err := vm.EjectMedia(); err != nil {
				return "", fmt.Errorf("redfish: eject %s before insert: %w", vm.ODataID, err)
			}
		}
		if err := vm.InsertMedia(image, true, true); err != nil {
			return "", fmt.Errorf("redfish: insert media into %s: %w", vm.ODataID, err)
		}
		return vm.ODataID, nil
	}
	return "", fmt.Errorf("redfish: system %s has no USB stick or floppy virtual media that accepts InsertMedia: %w", s.uri, ErrUnsupported)
}

// InsertTyped puts image into the first device (by URI) that accepts
// InsertMedia and one of types, ejecting what it held, and returns the
// device's URI. CD and DVD devices take a CD or DVD image alike.
func (s *System) InsertTyped(image string, types ...redfish.VirtualMediaType) (string, error) {
	all, err := s.VirtualMedia()
	if err != nil {
		return "", err
	}
	slices.SortFunc(all, func(a, b *redfish.VirtualMedia) int { return strings.Compare(a.ODataID, b.ODataID) })
	for _, vm := range all {
		if !vm.SupportsMediaInsert || !hasMediaType(vm, types) {
			continue
		}
		if vm.Inserted {
			if err := vm.EjectMedia(); err != nil {
				return "", fmt.Errorf("redfish: eject %s before insert: %w", vm.ODataID, err)
			}
		}
		if err := vm.InsertMedia(image, true, true); err != nil {
			return "", fmt.Errorf("redfish: insert media into %s: %w", vm.ODataID, err)
		}
		return vm.ODataID, nil
	}
	return "", fmt.Errorf("redfish: system %s has no virtual media of type %v that accepts InsertMedia: %w", s.uri, types, ErrUnsupported)
}

// EjectTyped ejects every device of one of types holding media (every
// device holding media when types is empty).
func (s *System) EjectTyped(types ...redfish.VirtualMediaType) error {
	all, err := s.VirtualMedia()
	if err != nil {
		return err
	}
	for _, vm := range all {
		if vm.Inserted && (len(types) == 0 || hasMediaType(vm, types)) {
			if err := vm.EjectMedia(); err != nil {
				return fmt.Errorf("redfish: eject %s: %w", vm.ODataID, err)
			}
		}
	}
	return nil
}

func hasMediaType(vm *redfish.VirtualMedia, types []redfish.VirtualMediaType) bool {
	for _, t := range vm.MediaTypes {
		if slices.Contains(types, t) {
			return true
		}
	}
	return false
}

// EjectImage ejects every virtual media device holding image.
func (s *System) EjectImage(image string) error {
	all, err := s.VirtualMedia()
	if err != nil {
		return err
	}
	for _, vm := range all {
		if vm.Inserted && vm.Image == image {
			if err := vm.EjectMedia(); err != nil {
				return fmt.Errorf("redfish: eject %s: %w", vm.ODataID, err)
			}
		}
	}
	return nil
}
