package ironicapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sort"

	"github.com/anvilmetal/anvil/baremetal"
)

// PATCH /v1/nodes/{node}: an RFC 6902 patch applied as Ironic applies
// it (in order, on the node's writable fields), then written through the
// conductor's Update, which refuses it while a transition is in progress.
func (h *Handler) patchNode(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	for _, p := range ops {
		f := p.rootField()
		if !nodeWritable[f] {
			if _, known := nodeFieldVersions[f]; known {
				return badRequest("'/%s' is an internal attribute and can not be updated", f)
			}
		}
	}
	before := rawNodeView(n)
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	changed := make([]string, 0, len(ops))
	for f := range nodeWritable {
		if !reflect.DeepEqual(normalize(before[f]), normalize(after[f])) {
			changed = append(changed, f)
		}
	}
	sort.Strings(changed)
	updated, err := h.c.Update(rq.ctx, n.UUID, func(cur *baremetal.Node) error {
		for _, f := range changed {
			if err := rq.setNodeField(cur, f, after[f]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, rq.nodeView(updated))
}

// normalize turns a decoded JSON value into a comparable form (numbers
// as their text).
func normalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	return string(data)
}

// rawNodeView is the writable fields of n, unmasked: the document a node
// PATCH applies to.
func rawNodeView(n *baremetal.Node) map[string]any {
	var ac any
	if n.AutomatedClean != nil {
		ac = *n.AutomatedClean
	}
	return map[string]any{
		"uuid": n.UUID, "name": nullable(n.Name), "driver": n.Driver,
		"driver_info": object(n.DriverInfo), "extra": object(n.Extra),
		"instance_info": object(n.InstanceInfo), "instance_uuid": nullable(n.InstanceUUID),
		"instance_name": nullable(n.InstanceName), "properties": object(n.Properties),
		"maintenance": n.Maintenance, "maintenance_reason": nullable(n.MaintenanceReason),
		"chassis_uuid": nil, "resource_class": nullable(n.ResourceClass),
		"conductor_group": n.ConductorGroup, "automated_clean": ac,
		"protected": n.Protected, "protected_reason": nullable(n.ProtectedReason),
		"owner": nullable(n.Owner), "lessee": nullable(n.Lessee),
		"description": nullable(n.Description), "retired": n.Retired,
		"retired_reason": nullable(n.RetiredReason), "network_data": object(n.NetworkData),
		"shard": nullable(n.Shard), "parent_node": nullable(n.ParentNode),
		"disable_power_off":    n.DisablePowerOff,
		"bios_interface":       nullable(n.BIOSInterface),
		"boot_interface":       nullable(n.BootInterface),
		"console_interface":    nullable(n.ConsoleInterface),
		"deploy_interface":     nullable(n.DeployInterface),
		"firmware_interface":   nullable(n.FirmwareInterface),
		"inspect_interface":    nullable(n.InspectInterface),
		"management_interface": nullable(n.ManagementInterface),
		"network_interface":    nullable(n.NetworkInterface),
		"power_interface":      nullable(n.PowerInterface),
		"raid_interface":       nullable(n.RAIDInterface),
		"rescue_interface":     nullable(n.RescueInterface),
		"storage_interface":    nullable(n.StorageInterface),
		"vendor_interface":     nullable(n.VendorInterface),
	}
}
