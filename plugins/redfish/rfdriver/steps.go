package rfdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// ErrInspection is wrapped when inspection could not discover an
// essential property.
var ErrInspection = errors.New("hardware inspection failed")

// ErrStepFailed is wrapped when an out-of-band step could not achieve its
// effect (settings not applied, task failed).
var ErrStepFailed = errors.New("step failed")

// oob declares an out-of-band step: priority 0 (run only when asked) and
// no ramdisk needed, for clean and deploy.
func oob(kind steps.Kind, name string, args map[string]steps.ArgInfo) []steps.Step {
	switch kind {
	case steps.Clean, steps.Deploy, steps.Service:
		return []steps.Step{{Name: name, Priority: 0, ArgsInfo: args, Abortable: false, RequiresRamdisk: false}}
	}
	return nil
}

func (b base) stepNotFound(kind steps.Kind, name string) error {
	return &driver.StepNotFoundError{Kind: b.kind, Impl: b.name, StepKind: string(kind), Step: name}
}

func (b base) argError(t *driver.Task, key, expected string) error {
	return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: b.kind, Impl: b.name, Field: "args", Key: key, Expected: expected}
}

// rebootAndWait restarts the system (or powers it on) so that staged
// settings take effect, and waits until it is on.
func (b base) rebootAndWait(ctx context.Context, t *driver.Task, sys *System) error {
	ps, err := sys.PowerState()
	if err != nil {
		return b.wrap(t, "read power state", err)
	}
	resets := []string{"ForceRestart"}
	if ps != "On" {
		resets = []string{"On", "ForceOn"}
	}
	if _, err := sys.Reset(resets...); err != nil {
		return b.wrap(t, "reboot to apply", err)
	}
	return b.waitPower(ctx, t, sys, "On", 0)
}

// BIOSImpl is the "redfish" bios interface, with the apply_configuration
// and factory_reset steps.
type BIOSImpl struct{ base }

// BIOS returns the "redfish" bios interface.
func (d *Drivers) BIOS() *BIOSImpl { return &BIOSImpl{base{d, driver.KindBIOS, ImplRedfish}} }

// CacheBIOSSettings returns the current settings with registry metadata.
func (bi *BIOSImpl) CacheBIOSSettings(ctx context.Context, t *driver.Task) ([]driver.BIOSSetting, error) {
	sys, err := bi.system(ctx, t)
	if err != nil {
		return nil, err
	}
	cur, err := sys.BIOSSettings()
	if err != nil {
		return nil, bi.wrap(t, "read BIOS settings", err)
	}
	reg, err := sys.BIOSRegistry()
	if err != nil {
		return nil, bi.wrap(t, "read BIOS registry", err)
	}
	meta := map[string]BIOSAttribute{}
	for _, a := range reg {
		meta[a.Name] = a
	}
	out := make([]driver.BIOSSetting, 0, len(cur))
	for name, v := range cur {
		s := driver.BIOSSetting{Name: name, Value: fmt.Sprint(v)}
		if a, ok := meta[name]; ok {
			s.AttributeType, s.AllowableValues, s.ReadOnly, s.ResetRequired = a.Type, a.AllowedValues, a.ReadOnly, a.ResetRequired
		}
		out = append(out, s)
	}
	sortSettings(out)
	return out, nil
}

func sortSettings(s []driver.BIOSSetting) {
	slices.SortFunc(s, func(a, b driver.BIOSSetting) int { return strings.Compare(a.Name, b.Name) })
}

// Steps returns apply_configuration and factory_reset.
func (bi *BIOSImpl) Steps(kind steps.Kind) []steps.Step {
	out := oob(kind, "apply_configuration", map[string]steps.ArgInfo{
		"settings": {Description: "A list of BIOS settings to apply, each an object with \"name\" and \"value\".", Required: true},
	})
	out = append(out, oob(kind, "factory_reset", nil)...)
	for i := range out {
		out[i].Interface = string(driver.KindBIOS)
	}
	return out
}

// ExecuteStep runs apply_configuration or factory_reset: stage, reboot,
// then check that the BIOS reports the expected values.
func (bi *BIOSImpl) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, step steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(bi, kind, step.Name) {
		return driver.StepResult{}, bi.stepNotFound(kind, step.Name)
	}
	sys, err := bi.system(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	want := map[string]any{}
	switch step.Name {
	case "apply_configuration":
		list, ok := step.Args["settings"].([]any)
		if !ok || len(list) == 0 {
			return driver.StepResult{}, bi.argError(t, "settings", "a non-empty list of {\"name\": ..., \"value\": ...}")
		}
		for i, e := range list {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			if name == "" {
				return driver.StepResult{}, bi.argError(t, "settings", fmt.Sprintf("settings[%d] to have a name", i))
			}
			want[name] = m["value"]
		}
		if err := sys.ApplyBIOS(want); err != nil {
			return driver.StepResult{}, bi.wrap(t, "apply_configuration", err)
		}
	case "factory_reset":
		if err := sys.ResetBIOS(); err != nil {
			return driver.StepResult{}, bi.wrap(t, "factory_reset", err)
		}
	}
	if err := bi.rebootAndWait(ctx, t, sys); err != nil {
		return driver.StepResult{}, err
	}
	cur, err := sys.BIOSSettings()
	if err != nil {
		return driver.StepResult{}, bi.wrap(t, "verify BIOS settings", err)
	}
	for k, v := range want {
		if fmt.Sprint(cur[k]) != fmt.Sprint(v) {
			return driver.StepResult{}, bi.wrap(t, step.Name, fmt.Errorf("%w: %s is %v after reboot, want %v", ErrStepFailed, k, cur[k], v))
		}
	}
	if settings, err := bi.CacheBIOSSettings(ctx, t); err == nil {
		t.SetDriverInternalInfo("bios_settings", settingsMap(settings))
	}
	return driver.StepResult{}, nil
}

func settingsMap(s []driver.BIOSSetting) map[string]any {
	out := make(map[string]any, len(s))
	for _, e := range s {
		out[e.Name] = e.Value
	}
	return out
}

// RAIDImpl is the "redfish" raid interface, with the create_configuration
// and delete_configuration steps over Storage/Volumes.
type RAIDImpl struct{ base }

// RAID returns the "redfish" raid interface.
func (d *Drivers) RAID() *RAIDImpl { return &RAIDImpl{base{d, driver.KindRAID, ImplRedfish}} }

// raidLevels maps Ironic RAID levels to Redfish RAIDType values.
var raidLevels = map[string]string{
	"0": "RAID0", "1": "RAID1", "5": "RAID5", "6": "RAID6", "1+0": "RAID10", "5+0": "RAID50", "6+0": "RAID60",
}

type logicalDisk struct {
	sizeGB int64 // 0 means MAX
	level  string
	root   bool
	name   string
}

func (r *RAIDImpl) parseConfig(t *driver.Task, config map[string]any) ([]logicalDisk, error) {
	lds, ok := config["logical_disks"].([]any)
	if !ok || len(lds) == 0 {
		return nil, r.argError(t, "target_raid_config", "an object with a non-empty \"logical_disks\" list")
	}
	var out []logicalDisk
	for i, e := range lds {
		m, _ := e.(map[string]any)
		key := fmt.Sprintf("target_raid_config.logical_disks[%d]", i)
		level, _ := m["raid_level"].(string)
		if _, ok := raidLevels[level]; !ok {
			return nil, r.argError(t, key+".raid_level", "one of 0, 1, 5, 6, 1+0, 5+0, 6+0")
		}
		ld := logicalDisk{level: level}
		switch s := m["size_gb"].(type) {
		case float64:
			if s <= 0 || s != float64(int64(s)) {
				return nil, r.argError(t, key+".size_gb", "a positive whole number of GiB or \"MAX\"")
			}
			ld.sizeGB = int64(s)
		case string:
			if s != "MAX" {
				return nil, r.argError(t, key+".size_gb", "a positive whole number of GiB or \"MAX\"")
			}
		default:
			return nil, r.argError(t, key+".size_gb", "a positive whole number of GiB or \"MAX\"")
		}
		ld.root, _ = m["is_root_volume"].(bool)
		ld.name, _ = m["volume_name"].(string)
		out = append(out, ld)
	}
	return out, nil
}

// ValidateRAIDConfig checks an Ironic target_raid_config.
func (r *RAIDImpl) ValidateRAIDConfig(_ context.Context, t *driver.Task, config map[string]any) error {
	_, err := r.parseConfig(t, config)
	return err
}

// Steps returns create_configuration and delete_configuration.
func (r *RAIDImpl) Steps(kind steps.Kind) []steps.Step {
	out := oob(kind, "create_configuration", map[string]steps.ArgInfo{
		"target_raid_config":     {Description: "The RAID configuration to build, as Ironic's target_raid_config: {\"logical_disks\": [...]}. Defaults to driver_internal_info.target_raid_config.", Required: false},
		"create_root_volume":     {Description: "Whether to create the logical disk marked is_root_volume (default true).", Required: false},
		"create_nonroot_volumes": {Description: "Whether to create the other logical disks (default true).", Required: false},
		"delete_existing":        {Description: "Whether to delete existing volumes first (default false).", Required: false},
	})
	out = append(out, oob(kind, "delete_configuration", nil)...)
	for i := range out {
		out[i].Interface = string(driver.KindRAID)
	}
	return out
}

func boolArg(args map[string]any, key string, def bool) bool {
	if v, ok := args[key].(bool); ok {
		return v
	}
	return def
}

// ExecuteStep creates or deletes volumes and records the result in
// driver_internal_info.raid_config.
func (r *RAIDImpl) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, step steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(r, kind, step.Name) {
		return driver.StepResult{}, r.stepNotFound(kind, step.Name)
	}
	sys, err := r.system(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	if step.Name == "delete_configuration" || boolArg(step.Args, "delete_existing", false) {
		vols, err := sys.Volumes()
		if err != nil {
			return driver.StepResult{}, r.wrap(t, "list volumes", err)
		}
		for _, v := range vols {
			if err := sys.DeleteVolume(v.URI); err != nil {
				return driver.StepResult{}, r.wrap(t, "delete volume "+v.URI, err)
			}
		}
		if step.Name == "delete_configuration" {
			t.SetDriverInternalInfo("raid_config", map[string]any{"logical_disks": []any{}})
			return driver.StepResult{}, nil
		}
	}
	cfg, _ := step.Args["target_raid_config"].(map[string]any)
	if cfg == nil {
		cfg, _ = t.DriverInternalInfo["target_raid_config"].(map[string]any)
	}
	lds, err := r.parseConfig(t, cfg)
	if err != nil {
		return driver.StepResult{}, err
	}
	var created []any
	for _, ld := range lds {
		if (ld.root && !boolArg(step.Args, "create_root_volume", true)) || (!ld.root && !boolArg(step.Args, "create_nonroot_volumes", true)) {
			continue
		}
		size := ld.sizeGB * gib
		if size == 0 {
			size = r.maxSize(sys)
		}
		uri, err := sys.CreateVolume(ld.name, raidLevels[ld.level], size)
		if err != nil {
			return driver.StepResult{}, r.wrap(t, "create_configuration", err)
		}
		created = append(created, map[string]any{
			"raid_level": ld.level, "size_gb": size / gib, "is_root_volume": ld.root, "volume_uri": uri,
		})
	}
	t.SetDriverInternalInfo("raid_config", map[string]any{"logical_disks": created})
	return driver.StepResult{}, nil
}

// maxSize approximates "MAX" with the smallest drive's capacity, which
// any RAID level over those drives can hold.
func (r *RAIDImpl) maxSize(sys *System) int64 {
	inv, err := sys.Inspect()
	if err != nil {
		return 0
	}
	var smallest int64
	for _, d := range inv.Disks {
		if d.Kind == "drive" && (smallest == 0 || d.SizeBytes < smallest) {
			smallest = d.SizeBytes
		}
	}
	return smallest
}

// FirmwareImpl is the "redfish" firmware interface, with the update step.
type FirmwareImpl struct{ base }

// Firmware returns the "redfish" firmware interface.
func (d *Drivers) Firmware() *FirmwareImpl {
	return &FirmwareImpl{base{d, driver.KindFirmware, ImplRedfish}}
}

// FirmwareCacheKey is the driver_internal_info key of the node's
// firmware cache: a list of {component, initial_version,
// current_version, last_version_flashed}, as Ironic's
// firmware_information table, refreshed after every update.
const FirmwareCacheKey = "firmware_components"

// CacheFirmwareComponents lists the firmware inventory as the BMC
// reports it now, each component's initial version and last version
// flashed taken from the node's firmware cache; Ironic names the BIOS and
// BMC components "bios" and "bmc". The bmc component names its model
// (the managing Manager's Model, API 1.114), as Ironic's redfish
// firmware interface does; a manager that cannot be read leaves it empty.
func (f *FirmwareImpl) CacheFirmwareComponents(ctx context.Context, t *driver.Task) ([]driver.FirmwareComponent, error) {
	sys, err := f.system(ctx, t)
	if err != nil {
		return nil, err
	}
	comps, err := sys.Firmware()
	if err != nil {
		return nil, f.wrap(t, "read firmware inventory", err)
	}
	cached := cachedFirmware(t)
	out := make([]driver.FirmwareComponent, 0, len(comps))
	for _, c := range comps {
		fc := driver.FirmwareComponent{Component: componentName(c.ID), InitialVersion: c.Version, CurrentVersion: c.Version}
		if old, ok := cached[fc.Component]; ok {
			fc.InitialVersion, fc.LastVersionFlashed = old.InitialVersion, old.LastVersionFlashed
		}
		if fc.Component == "bmc" {
			fc.Model, _ = sys.ManagerModel()
		}
		out = append(out, fc)
	}
	return out, nil
}

// cachedFirmware reads the node's firmware cache by component.
func cachedFirmware(t *driver.Task) map[string]driver.FirmwareComponent {
	out := map[string]driver.FirmwareComponent{}
	list, _ := t.DriverInternalInfo[FirmwareCacheKey].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		c, _ := m["component"].(string)
		if c == "" {
			continue
		}
		fc := driver.FirmwareComponent{Component: c}
		fc.InitialVersion, _ = m["initial_version"].(string)
		fc.CurrentVersion, _ = m["current_version"].(string)
		fc.LastVersionFlashed, _ = m["last_version_flashed"].(string)
		out[c] = fc
	}
	return out
}

func componentName(id string) string {
	switch strings.ToLower(id) {
	case "bios":
		return "bios"
	case "bmc":
		return "bmc"
	}
	return id
}

// Steps returns update.
func (f *FirmwareImpl) Steps(kind steps.Kind) []steps.Step {
	out := oob(kind, "update", map[string]steps.ArgInfo{
		"settings": {Description: "A list of updates, each an object with \"component\" (bios, bmc or an inventory id) and \"url\" of the image.", Required: true},
	})
	for i := range out {
		out[i].Interface = string(driver.KindFirmware)
	}
	return out
}

// ExecuteStep runs update: one SimpleUpdate per component, each task
// polled to its end (a task that ends in Exception fails the step with
// the BMC's messages); when a task says the update takes effect at the
// next reset (ResetRequired), the system is rebooted once all are done
// and waited for; then the inventory is re-read into the node's firmware
// cache (FirmwareCacheKey), the updated components' last_version_flashed
// set to their new version.
func (f *FirmwareImpl) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, step steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(f, kind, step.Name) {
		return driver.StepResult{}, f.stepNotFound(kind, step.Name)
	}
	list, ok := step.Args["settings"].([]any)
	if !ok || len(list) == 0 {
		return driver.StepResult{}, f.argError(t, "settings", "a non-empty list of {\"component\": ..., \"url\": ...}")
	}
	sys, err := f.system(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	inv, err := sys.Firmware()
	if err != nil {
		return driver.StepResult{}, f.wrap(t, "read firmware inventory", err)
	}
	needReset := false
	updated := map[string]bool{}
	for i, e := range list {
		m, _ := e.(map[string]any)
		comp, _ := m["component"].(string)
		url, _ := m["url"].(string)
		if comp == "" || url == "" {
			return driver.StepResult{}, f.argError(t, "settings", fmt.Sprintf("settings[%d] to have a component and a url", i))
		}
		target, name := "", ""
		for _, c := range inv {
			if strings.EqualFold(c.ID, comp) || componentName(c.ID) == comp {
				target, name = c.URI, componentName(c.ID)
			}
		}
		if target == "" {
			return driver.StepResult{}, f.argError(t, "settings", fmt.Sprintf("settings[%d].component to be one of the inventory (got %q)", i, comp))
		}
		task, err := sys.StartUpdate(url, []string{target})
		if err != nil {
			return driver.StepResult{}, f.wrap(t, "update "+comp, err)
		}
		if task == "" {
			continue
		}
		st, err := sys.WaitTask(ctx, task, f.d.opts.PollInterval)
		if err != nil {
			return driver.StepResult{}, f.wrap(t, "update "+comp, err)
		}
		if !st.OK() {
			return driver.StepResult{}, f.wrap(t, "update "+comp, fmt.Errorf("%w: task %s ended %s: %s", ErrStepFailed, task, st.State, strings.Join(st.Messages, "; ")))
		}
		updated[name] = true
		needReset = needReset || st.ResetRequired()
	}
	if needReset {
		// The reboot the BMC asks for, to activate what it staged.
		if err := f.rebootAndWait(ctx, t, sys); err != nil {
			return driver.StepResult{}, err
		}
	}
	before := map[string]string{}
	for _, c := range inv {
		before[componentName(c.ID)] = c.Version
	}
	comps, err := f.CacheFirmwareComponents(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	cache := make([]any, 0, len(comps))
	for _, c := range comps {
		if _, known := cachedFirmware(t)[c.Component]; !known {
			c.InitialVersion = before[c.Component]
		}
		if updated[c.Component] {
			c.LastVersionFlashed = c.CurrentVersion
		}
		cache = append(cache, map[string]any{"component": c.Component, "initial_version": c.InitialVersion,
			"current_version": c.CurrentVersion, "last_version_flashed": c.LastVersionFlashed})
	}
	t.SetDriverInternalInfo(FirmwareCacheKey, cache)
	return driver.StepResult{}, nil
}

// VendorImpl is the "redfish" vendor interface.
type VendorImpl struct{ base }

// Vendor returns the "redfish" vendor interface.
func (d *Drivers) Vendor() *VendorImpl { return &VendorImpl{base{d, driver.KindVendor, ImplRedfish}} }

// Methods lists eject_vmedia.
func (v *VendorImpl) Methods() []driver.VendorMethod {
	return []driver.VendorMethod{{
		Name: "eject_vmedia", Description: "Eject every inserted virtual CD/DVD.", HTTPMethods: []string{"POST"},
	}}
}

// Call runs a vendor method.
func (v *VendorImpl) Call(ctx context.Context, t *driver.Task, method, httpMethod string, _ map[string]any) (any, error) {
	if method != "eject_vmedia" || httpMethod != "POST" {
		return nil, v.unsupported("vendor passthru " + httpMethod + " " + method)
	}
	sys, err := v.system(ctx, t)
	if err != nil {
		return nil, err
	}
	return nil, v.wrap(t, "eject_vmedia", sys.EjectCD())
}

// Compile-time checks that every implementation satisfies its kind.
var (
	_ driver.PowerInterface      = (*PowerImpl)(nil)
	_ driver.ManagementInterface = (*ManagementImpl)(nil)
	_ driver.BootModeManager     = (*ManagementImpl)(nil)
	_ driver.NMIInjector         = (*ManagementImpl)(nil)
	_ driver.VirtualMediaManager = (*ManagementImpl)(nil)
	_ driver.IndicatorManager    = (*ManagementImpl)(nil)
	_ driver.HealthReader        = (*ManagementImpl)(nil)
	_ driver.SecureBootManager   = (*ManagementImpl)(nil)
	_ driver.BootInterface       = (*VirtualMediaBoot)(nil)
	_ driver.InspectInterface    = (*InspectImpl)(nil)
	_ driver.BIOSInterface       = (*BIOSImpl)(nil)
	_ driver.StepProvider        = (*BIOSImpl)(nil)
	_ driver.StepRunner          = (*BIOSImpl)(nil)
	_ driver.RAIDInterface       = (*RAIDImpl)(nil)
	_ driver.StepProvider        = (*RAIDImpl)(nil)
	_ driver.StepRunner          = (*RAIDImpl)(nil)
	_ driver.FirmwareInterface   = (*FirmwareImpl)(nil)
	_ driver.StepProvider        = (*FirmwareImpl)(nil)
	_ driver.StepRunner          = (*FirmwareImpl)(nil)
	_ driver.VendorInterface     = (*VendorImpl)(nil)
)
