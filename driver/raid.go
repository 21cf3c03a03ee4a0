package driver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// RAID configuration rules shared by every raid interface: Ironic's
// raid_config_schema.json and ironic/common/raid.py (validate,
// filter_target_raid_config, update_raid_info), as pure functions.

// RAIDLevels are the raid_level values Ironic's schema accepts.
var RAIDLevels = []string{"JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0"}

// raidLogicalDiskKeys are the logical disk properties of Ironic's schema
// (additionalProperties is false).
var raidLogicalDiskKeys = []string{
	"raid_level", "size_gb", "volume_name", "is_root_volume", "share_physical_disks",
	"disk_type", "interface_type", "number_of_physical_disks", "controller", "physical_disks",
}

// RAIDError is a target_raid_config that Ironic's schema or rules refuse:
// the node, the path of the bad value (such as
// "logical_disks[1].size_gb") and what was expected there.
type RAIDError struct {
	Node     string
	Path     string
	Expected string
}

func (e *RAIDError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("raid: node %s: RAID config validation error: %s", e.Node, e.Expected)
	}
	return fmt.Sprintf("raid: node %s: RAID config validation error: %s: expected %s", e.Node, e.Path, e.Expected)
}

// Is matches ErrInvalidParameter: the API answers 400.
func (e *RAIDError) Is(target error) bool { return target == ErrInvalidParameter }

// ValidateRAIDSchema checks cfg against Ironic's RAID configuration schema
// and its one-root-volume rule: an object with exactly the key
// logical_disks, a non-empty list of objects, each with raid_level (one of
// RAIDLevels) and size_gb (an integer > 0 or "MAX") and no key outside the
// schema's; volume_name and controller strings; is_root_volume and
// share_physical_disks booleans; disk_type hdd or ssd; interface_type
// sata, scsi or sas; number_of_physical_disks an integer > 0;
// physical_disks a list, which needs controller. physical_disks items may
// be strings (a controller's disk names, as Ironic's schema says) or
// objects (root device hints, as software RAID takes them: Ironic's
// documentation and IPA use that form). At most one logical disk is the
// root volume. node names the node in the error.
func ValidateRAIDSchema(node string, cfg map[string]any) error {
	bad := func(path, expected string) error { return &RAIDError{Node: node, Path: path, Expected: expected} }
	for k := range cfg {
		if k != "logical_disks" {
			return bad(k, "no property but logical_disks (additional properties are not allowed)")
		}
	}
	raw, ok := cfg["logical_disks"]
	if !ok {
		return bad("logical_disks", "a list of logical disks ('logical_disks' is a required property)")
	}
	lds, ok := raw.([]any)
	if !ok || len(lds) == 0 {
		return bad("logical_disks", "a non-empty list of logical disks")
	}
	roots := 0
	for i, e := range lds {
		path := fmt.Sprintf("logical_disks[%d]", i)
		ld, ok := e.(map[string]any)
		if !ok {
			return bad(path, "an object")
		}
		for _, k := range slices.Sorted(mapKeys(ld)) {
			if !slices.Contains(raidLogicalDiskKeys, k) {
				return bad(path+"."+k, "no such logical disk property (one of "+strings.Join(raidLogicalDiskKeys, ", ")+")")
			}
		}
		for _, req := range []string{"raid_level", "size_gb"} {
			if _, ok := ld[req]; !ok {
				return bad(path+"."+req, "a value ('"+req+"' is a required property)")
			}
		}
		if l, ok := ld["raid_level"].(string); !ok || !slices.Contains(RAIDLevels, l) {
			return bad(path+".raid_level", "one of "+strings.Join(RAIDLevels, ", ")+" (a string)")
		}
		if s, ok := ld["size_gb"].(string); ok {
			if s != "MAX" {
				return bad(path+".size_gb", `an integer > 0 or "MAX"`)
			}
		} else if n, ok := raidWhole(ld["size_gb"]); !ok || n <= 0 {
			return bad(path+".size_gb", `an integer > 0 or "MAX"`)
		}
		for _, k := range []string{"volume_name", "controller"} {
			if v, ok := ld[k]; ok {
				if _, ok := v.(string); !ok {
					return bad(path+"."+k, "a string")
				}
			}
		}
		for _, k := range []string{"is_root_volume", "share_physical_disks"} {
			if v, ok := ld[k]; ok {
				if _, ok := v.(bool); !ok {
					return bad(path+"."+k, "a boolean")
				}
			}
		}
		for k, enum := range map[string][]string{"disk_type": {"hdd", "ssd"}, "interface_type": {"sata", "scsi", "sas"}} {
			if v, ok := ld[k]; ok {
				if s, ok := v.(string); !ok || !slices.Contains(enum, s) {
					return bad(path+"."+k, "one of "+strings.Join(enum, ", "))
				}
			}
		}
		if v, ok := ld["number_of_physical_disks"]; ok {
			if n, ok := raidWhole(v); !ok || n <= 0 {
				return bad(path+".number_of_physical_disks", "an integer > 0")
			}
		}
		if v, ok := ld["physical_disks"]; ok {
			pds, ok := v.([]any)
			if !ok {
				return bad(path+".physical_disks", "a list")
			}
			for j, pd := range pds {
				switch pd.(type) {
				case string, map[string]any:
				default:
					return bad(fmt.Sprintf("%s.physical_disks[%d]", path, j), "a disk name (string) or root device hints (object)")
				}
			}
			if _, ok := ld["controller"]; !ok {
				return bad(path+".controller", "a controller: physical_disks depends on controller")
			}
		}
		if b, _ := ld["is_root_volume"].(bool); b {
			roots++
		}
	}
	if roots > 1 {
		return &RAIDError{Node: node, Expected: fmt.Sprintf("Raid config cannot have more than one root volume. %d root volumes were specified", roots)}
	}
	return nil
}

// raidWhole is wholeNumber that also reads the API's exact numbers
// (json.Number): 8 and 8.0 are integers, as for Python's jsonschema.
func raidWhole(v any) (int64, bool) {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		return wholeNumber(f)
	}
	return wholeNumber(v)
}

func mapKeys(m map[string]any) func(func(string) bool) { return maps.Keys(m) }

// FilterTargetRAIDConfig is Ironic's filter_target_raid_config: the
// node's target without the root volume (createRoot false) and/or without
// the other volumes (createNonRoot false). A node without a target, or
// with nothing left after the filtering, fails with a
// *MissingParameterError naming target_raid_config. The result is a copy.
func FilterTargetRAIDConfig(node string, kind Kind, impl string, target map[string]any, createRoot, createNonRoot bool) (map[string]any, error) {
	missing := &MissingParameterError{Node: node, Kind: kind, Impl: impl, Field: "node", Missing: []string{"target_raid_config"}}
	if len(target) == 0 {
		missing.Hints = map[string]string{"target_raid_config": "the node has no target RAID configuration"}
		return nil, missing
	}
	out := cloneMap(target)
	lds, _ := out["logical_disks"].([]any)
	var skipped []string
	keep := func(root bool) bool { return (root && createRoot) || (!root && createNonRoot) }
	var kept []any
	for _, e := range lds {
		ld, _ := e.(map[string]any)
		root, _ := ld["is_root_volume"].(bool)
		if keep(root) {
			kept = append(kept, e)
		}
	}
	if !createRoot {
		skipped = append(skipped, "skipping root volume")
	}
	if !createNonRoot {
		skipped = append(skipped, "skipping non-root volumes")
	}
	if kept == nil {
		kept = []any{}
	}
	out["logical_disks"] = kept
	if len(kept) == 0 {
		missing.Hints = map[string]string{"target_raid_config": "empty target RAID configuration after " + strings.Join(skipped, " and ")}
		return nil, missing
	}
	return out, nil
}

// RAIDInfo is Ironic's update_raid_info: the node's new raid_config (a
// copy of current with last_updated, Ironic's str(datetime.utcnow())
// layout) and its new properties: with a root volume, local_gb (unless
// its size_gb is MAX), root_device (its root_device_hint, when given) and
// the raid_level capability. More than one root volume is a *RAIDError.
func RAIDInfo(node string, current, properties map[string]any, now time.Time) (raidConfig, props map[string]any, err error) {
	raidConfig = cloneMap(current)
	raidConfig["last_updated"] = now.UTC().Format("2006-01-02 15:04:05.000000")
	props = cloneMap(properties)
	if props == nil {
		props = map[string]any{}
	}
	lds, _ := current["logical_disks"].([]any)
	var root map[string]any
	roots := 0
	for _, e := range lds {
		ld, _ := e.(map[string]any)
		if b, _ := ld["is_root_volume"].(bool); b {
			roots++
			root = ld
		}
	}
	if roots > 1 {
		return nil, nil, &RAIDError{Node: node, Expected: fmt.Sprintf("Raid config cannot have more than one root volume. %d root volumes were specified", roots)}
	}
	if root != nil {
		if s, ok := root["size_gb"].(string); !ok || s != "MAX" {
			props["local_gb"] = root["size_gb"]
		}
		if h, ok := root["root_device_hint"]; ok {
			props["root_device"] = h
		}
		caps, _ := props["capabilities"].(string)
		level, _ := root["raid_level"].(string)
		props["capabilities"] = UpdateCapabilities(caps, map[string]string{"raid_level": level})
	}
	return raidConfig, props, nil
}

// UpdateCapabilities is Ironic's get_updated_capabilities: the
// "key:value,key:value" string caps with each of set added or replaced,
// existing keys keeping their place and new ones appended in sorted
// order.
func UpdateCapabilities(caps string, set map[string]string) string {
	type kv struct{ k, v string }
	var pairs []kv
	for item := range strings.SplitSeq(caps, ",") {
		if item == "" {
			continue
		}
		k, v, _ := strings.Cut(item, ":")
		pairs = append(pairs, kv{k, v})
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		found := false
		for i := range pairs {
			if pairs[i].k == k {
				pairs[i].v, found = set[k], true
			}
		}
		if !found {
			pairs = append(pairs, kv{k, set[k]})
		}
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p.k + ":" + p.v
	}
	return strings.Join(out, ",")
}

// RAIDLogicalDiskProperties is what Ironic's
// GET /v1/drivers/{driver}/raid/logical_disk_properties answers for a
// raid interface that follows Ironic's schema: each logical disk
// property with a description ending in "Required." or "Optional.".
func RAIDLogicalDiskProperties() map[string]string {
	return map[string]string{
		"raid_level":               "RAID level of the logical disk; one of " + strings.Join(RAIDLevels, ", ") + ". Required.",
		"size_gb":                  "Size of the logical disk in GiB, an integer, or \"MAX\" for the largest size possible. Required.",
		"volume_name":              "Name of the volume; the controller may ignore it. Optional.",
		"is_root_volume":           "true if this logical disk is the root volume (at most one is). Optional.",
		"share_physical_disks":     "true if this logical disk may share physical disks with other logical disks. Optional.",
		"disk_type":                "Type of the physical disks to use: hdd or ssd. Optional.",
		"interface_type":           "Interface type of the physical disks to use: sata, scsi or sas. Optional.",
		"number_of_physical_disks": "Number of physical disks to use for the logical disk. Optional.",
		"controller":               "Controller to create the logical disk on. Optional.",
		"physical_disks":           "The physical disks to use, on the controller named by controller. Optional.",
	}
}

// IsSoftwareRAID is Ironic's deploy_utils.is_software_raid: whether a
// target_raid_config asks for Linux software RAID, that is whether any of
// its logical disks names controller "software". The deploy interface
// then installs the boot loader on the RAID's holder disks, whatever the
// image type.
func IsSoftwareRAID(target map[string]any) bool {
	lds, _ := target["logical_disks"].([]any)
	for _, e := range lds {
		if ld, _ := e.(map[string]any); ld["controller"] == "software" {
			return true
		}
	}
	return false
}
