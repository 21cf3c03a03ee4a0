package rfdriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/redfish"
)

// BIOSAttribute describes one BIOS setting as the attribute registry
// declares it.
type BIOSAttribute struct {
	Name          string   `json:"name"`
	Type          string   `json:"attribute_type,omitempty"`
	AllowedValues []string `json:"allowable_values,omitempty"`
	ReadOnly      bool     `json:"read_only"`
	ResetRequired bool     `json:"reset_required"`
}

// BIOS returns the system's BIOS resource through gofish.
func (s *System) BIOS() (*redfish.Bios, error) {
	m, err := s.Raw()
	if err != nil {
		return nil, err
	}
	uri := link(m, "Bios")
	if uri == "" {
		return nil, fmt.Errorf("redfish: system %s has no Bios resource: %w", s.uri, ErrUnsupported)
	}
	return redfish.GetBios(s.cl, uri)
}

// BIOSSettings returns the current BIOS attributes.
func (s *System) BIOSSettings() (map[string]any, error) {
	b, err := s.BIOS()
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(b.Attributes))
	for k, v := range b.Attributes {
		out[k] = v
	}
	return out, nil
}

// BIOSRegistry reads the attribute registry the BIOS names, through the
// service's Registries collection. A service without one returns an empty
// list and no error: the registry is optional in Redfish.
func (s *System) BIOSRegistry() ([]BIOSAttribute, error) {
	b, err := s.BIOS()
	if err != nil {
		return nil, err
	}
	if b.AttributeRegistry == "" {
		return nil, nil
	}
	coll, err := getJSON(s.cl, "/redfish/v1/Registries")
	if err != nil {
		return nil, nil //nolint:nilerr // no registries collection: nothing to describe
	}
	for _, f := range links(coll, "Members") {
		fm, err := getJSON(s.cl, f)
		if err != nil || (getString(fm, "Registry") != b.AttributeRegistry && getString(fm, "Id") != b.AttributeRegistry) {
			continue
		}
		locs, _ := fm["Location"].([]any)
		for _, l := range locs {
			lm, _ := l.(map[string]any)
			uri := getString(lm, "Uri")
			if uri == "" {
				continue
			}
			reg, err := getJSON(s.cl, uri)
			if err != nil {
				return nil, err
			}
			var out []BIOSAttribute
			attrs, _ := getMap(reg, "RegistryEntries")["Attributes"].([]any)
			for _, a := range attrs {
				am, _ := a.(map[string]any)
				name := getString(am, "AttributeName")
				if name == "" {
					continue
				}
				ba := BIOSAttribute{Name: name, Type: getString(am, "Type")}
				ba.ReadOnly, _ = am["ReadOnly"].(bool)
				ba.ResetRequired, _ = am["ResetRequired"].(bool)
				vals, _ := am["Value"].([]any)
				for _, v := range vals {
					if vn := getString(v.(map[string]any), "ValueName"); vn != "" {
						ba.AllowedValues = append(ba.AllowedValues, vn)
					}
				}
				out = append(out, ba)
			}
			slices.SortFunc(out, func(a, b BIOSAttribute) int { return strings.Compare(a.Name, b.Name) })
			return out, nil
		}
	}
	return nil, nil
}

// ApplyBIOS stages new BIOS attribute values; they take effect at the next
// boot. Unknown attributes, or values the registry does not allow, are
// refused before anything is sent.
func (s *System) ApplyBIOS(settings map[string]any) error {
	reg, err := s.BIOSRegistry()
	if err != nil {
		return err
	}
	if len(reg) > 0 {
		for k, v := range settings {
			i := slices.IndexFunc(reg, func(a BIOSAttribute) bool { return a.Name == k })
			if i < 0 {
				return fmt.Errorf("redfish: BIOS attribute %q is not in the registry: %w", k, ErrUnsupported)
			}
			if reg[i].ReadOnly {
				return fmt.Errorf("redfish: BIOS attribute %q is read-only: %w", k, ErrUnsupported)
			}
			if vs, ok := v.(string); ok && len(reg[i].AllowedValues) > 0 && !slices.Contains(reg[i].AllowedValues, vs) {
				return fmt.Errorf("redfish: BIOS attribute %q: value %q not among %v: %w", k, vs, reg[i].AllowedValues, ErrUnsupported)
			}
		}
	}
	b, err := s.BIOS()
	if err != nil {
		return err
	}
	attrs := redfish.SettingsAttributes{}
	for k, v := range settings {
		attrs[k] = v
	}
	if err := b.UpdateBiosAttributes(attrs); err != nil {
		return fmt.Errorf("redfish: apply BIOS settings: %w", err)
	}
	return nil
}

// ResetBIOS asks the BMC to restore BIOS defaults at the next boot.
func (s *System) ResetBIOS() error {
	b, err := s.BIOS()
	if err != nil {
		return err
	}
	if err := b.ResetBios(); err != nil {
		return fmt.Errorf("redfish: reset BIOS to defaults: %w", err)
	}
	return nil
}

// Volume is a logical disk of a storage controller.
type Volume struct {
	URI           string `json:"uri"`
	Name          string `json:"name"`
	RAIDType      string `json:"raid_level"`
	CapacityBytes int64  `json:"size_bytes"`
}

// Storage lists the URIs of the system's Storage resources.
func (s *System) Storage() ([]string, error) {
	m, err := s.Raw()
	if err != nil {
		return nil, err
	}
	uri := link(m, "Storage")
	if uri == "" {
		return nil, fmt.Errorf("redfish: system %s has no Storage collection: %w", s.uri, ErrUnsupported)
	}
	coll, err := getJSON(s.cl, uri)
	if err != nil {
		return nil, err
	}
	return links(coll, "Members"), nil
}

// Volumes lists the volumes of every storage controller, through gofish.
func (s *System) Volumes() ([]Volume, error) {
	stores, err := s.Storage()
	if err != nil {
		return nil, err
	}
	var out []Volume
	for _, st := range stores {
		storage, err := redfish.GetStorage(s.cl, st)
		if err != nil {
			return nil, err
		}
		vols, err := storage.Volumes()
		if err != nil {
			return nil, fmt.Errorf("redfish: volumes of %s: %w", st, err)
		}
		for _, v := range vols {
			out = append(out, Volume{URI: v.ODataID, Name: v.Name, RAIDType: string(v.RAIDType), CapacityBytes: int64(v.CapacityBytes)})
		}
	}
	slices.SortFunc(out, func(a, b Volume) int { return strings.Compare(a.URI, b.URI) })
	return out, nil
}

// CreateVolume creates a logical disk on the first storage controller that
// has a Volumes collection and returns its URI.
func (s *System) CreateVolume(name, raidType string, sizeBytes int64) (string, error) {
	stores, err := s.Storage()
	if err != nil {
		return "", err
	}
	for _, st := range stores {
		sm, err := getJSON(s.cl, st)
		if err != nil {
			return "", err
		}
		vuri := link(sm, "Volumes")
		if vuri == "" {
			continue
		}
		body := map[string]any{"RAIDType": raidType, "CapacityBytes": sizeBytes}
		if name != "" {
			body["Name"] = name
		}
		resp, err := s.cl.Post(vuri, body)
		if err != nil {
			return "", fmt.Errorf("redfish: create %s volume: %w", raidType, err)
		}
		loc := resp.Header.Get("Location")
		drain(resp)
		if i := strings.Index(loc, "/redfish/"); i > 0 {
			loc = loc[i:]
		}
		return loc, nil
	}
	return "", fmt.Errorf("redfish: system %s has no storage controller with a Volumes collection: %w", s.uri, ErrUnsupported)
}

// DeleteVolume deletes the volume at uri.
func (s *System) DeleteVolume(uri string) error {
	resp, err := s.cl.Delete(uri)
	if err != nil {
		return fmt.Errorf("redfish: delete volume: %w", err)
	}
	drain(resp)
	return nil
}

// Component is one firmware inventory entry.
type Component struct {
	ID        string `json:"id"`
	URI       string `json:"uri"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Updatable bool   `json:"updateable"`
}

// Firmware lists the UpdateService's firmware inventory through gofish.
func (s *System) Firmware() ([]Component, error) {
	us, err := redfish.GetUpdateService(s.cl, "/redfish/v1/UpdateService")
	if err != nil {
		return nil, fmt.Errorf("redfish: update service: %w", err)
	}
	inv, err := us.FirmwareInventories()
	if err != nil {
		return nil, fmt.Errorf("redfish: firmware inventory: %w", err)
	}
	out := make([]Component, 0, len(inv))
	for _, c := range inv {
		out = append(out, Component{ID: c.ID, URI: c.ODataID, Name: c.Name, Version: c.Version, Updatable: c.Updateable})
	}
	slices.SortFunc(out, func(a, b Component) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// StartUpdate posts UpdateService.SimpleUpdate and returns the task
// monitor URI the BMC answers with (empty if it finished synchronously).
func (s *System) StartUpdate(imageURI string, targets []string) (string, error) {
	svc, err := getJSON(s.cl, "/redfish/v1/UpdateService")
	if err != nil {
		return "", err
	}
	target := getString(getMap(getMap(svc, "Actions"), "#UpdateService.SimpleUpdate"), "target")
	if target == "" {
		return "", fmt.Errorf("redfish: update service offers no SimpleUpdate: %w", ErrUnsupported)
	}
	body := redfish.SimpleUpdateParameters{ImageURI: imageURI, Targets: targets}
	resp, err := s.cl.Post(target, body)
	if err != nil {
		return "", fmt.Errorf("redfish: firmware update: %w", err)
	}
	loc := resp.Header.Get("Location")
	drain(resp)
	if i := strings.Index(loc, "/redfish/"); i > 0 {
		loc = loc[i:]
	}
	return loc, nil
}

// TaskStatus is a Redfish task's progress.
type TaskStatus struct {
	State    string // New, Running, Completed, Exception, Killed, ...
	Percent  int
	Messages []string
	// MessageIDs are the messages' registry ids (Base.1.8.ResetRequired).
	MessageIDs []string
}

// ResetRequired reports whether the task's messages say the update
// takes effect only after the system resets (the Base registry's
// ResetRequired, or the Update registry's AwaitingActivation).
func (t TaskStatus) ResetRequired() bool {
	for _, id := range t.MessageIDs {
		switch id[strings.LastIndexByte(id, '.')+1:] {
		case "ResetRequired", "AwaitingActivation", "ActivateFailed":
			return true
		}
	}
	return false
}

// Done reports whether the task stopped, successfully or not.
func (t TaskStatus) Done() bool {
	switch t.State {
	case "Completed", "Exception", "Killed", "Cancelled":
		return true
	}
	return false
}

// OK reports whether the task completed successfully.
func (t TaskStatus) OK() bool { return t.State == "Completed" }

// Task reads a task through gofish.
func (s *System) Task(uri string) (TaskStatus, error) {
	t, err := redfish.GetTask(s.cl, uri)
	if err != nil {
		return TaskStatus{}, fmt.Errorf("redfish: task %s: %w", uri, err)
	}
	st := TaskStatus{State: string(t.TaskState), Percent: t.PercentComplete}
	for _, m := range t.Messages {
		st.Messages = append(st.Messages, m.Message)
		st.MessageIDs = append(st.MessageIDs, m.MessageID)
	}
	return st, nil
}

// WaitTask polls a task every interval until it stops or ctx ends.
func (s *System) WaitTask(ctx context.Context, uri string, interval time.Duration) (TaskStatus, error) {
	for {
		st, err := s.Task(uri)
		if err != nil || st.Done() {
			return st, err
		}
		if err := s.conn.opts.Sleep(ctx, interval); err != nil {
			return st, fmt.Errorf("redfish: waiting for task %s: %w", uri, err)
		}
	}
}
