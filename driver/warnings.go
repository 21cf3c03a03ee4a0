package driver

import (
	"fmt"
	"sort"
	"strings"
)

// ValidationWarning is a harmless finding of validation: the node works,
// but something is probably not what its owner meant (a misspelt
// driver_info key). Warnings never fail an operation; the conductor
// records them in the node's history and log when it verifies the node.
type ValidationWarning struct {
	Node    string // node UUID
	Field   string // "driver_info"
	Key     string
	Message string
}

func (w ValidationWarning) String() string {
	return fmt.Sprintf("node %s: %s[%q]: %s", w.Node, w.Field, w.Key, w.Message)
}

// ValidationWarnings reports the node's driver_info keys that look like
// they belong to its hardware type but that no interface declares in its
// Properties: keys that start with the hardware type's name followed by
// "_" (redfish_frobnicate on a redfish node, ipmi_passwrd on an ipmi
// node; a "-" in the name counts as "_"). Keys of other families
// (deploy_kernel, agent_verify_ca, ...) are left alone, as another
// interface may read them. Ironic ignores unknown keys; Anvil ignores them
// too but says so, because a misspelt optional key silently falls back to
// a default. It needs nothing but the property lists, so it works the same
// for built-in and plugin drivers. Sorted by key.
func (d *Driver) ValidationWarnings(t *Task) []ValidationWarning {
	if d.HardwareType == "" {
		return nil
	}
	known := map[string]bool{}
	for _, p := range d.Properties() {
		known[p.Name] = true
	}
	prefix := strings.ReplaceAll(d.HardwareType, "-", "_") + "_"
	var out []ValidationWarning
	for key := range t.DriverInfo {
		if !known[key] && strings.HasPrefix(key, prefix) {
			out = append(out, ValidationWarning{Node: t.NodeUUID, Field: "driver_info", Key: key,
				Message: fmt.Sprintf("unknown key, ignored: no interface of hardware type %q reads it (misspelt?)", d.HardwareType)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
