package ironicapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// maxDescriptionLength is Ironic's _NODE_DESCRIPTION_MAX_LENGTH.
const maxDescriptionLength = 4096

// PATCH /v1/nodes/{node}: an RFC 6902 patch applied as Ironic applies
// it (in order, on the node's writable fields), then written through the
// conductor's Update, which refuses it while a transition is in progress
// (except the lone removal of instance_uuid from a node in maintenance).
// ?reset_interfaces (1.45), with a new driver, resets every interface the
// patch does not set to the new hardware type's default; a root field
// the patch removes is reset to its default.
func (h *Handler) patchNode(rq *request) error {
	reset := false
	if s, ok := rq.r.URL.Query()["reset_interfaces"]; ok {
		if !rq.v.AtLeast(45) {
			return notAcceptable("Request not acceptable.")
		}
		b, err := parseBoolParam("reset_interfaces", s[0])
		if err != nil {
			return err
		}
		reset = b
	}
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	driverPatched := false
	var names []any
	for _, p := range ops {
		f := p.rootField()
		if f == "traits" {
			return badRequest("Cannot update node traits via node patch. Node traits should be updated via the node traits API.")
		}
		if !nodeWritable[f] {
			if _, known := nodeFieldVersions[f]; known {
				return badRequest("'/%s' is an internal attribute and can not be updated", f)
			}
		}
		if minor := nodeFieldVersions[f]; minor > 0 && !rq.v.AtLeast(minor) && p.Op != "remove" && p.Value != nil {
			return notAcceptable("Request not acceptable.")
		}
		if p.Path == "/driver" && p.Op != "remove" {
			driverPatched = true
		}
		if p.Path == "/name" && p.Op != "remove" {
			names = append(names, p.Value)
		}
		if p.Path == "/description" && p.Op != "remove" {
			if d, ok := p.Value.(string); ok && len([]rune(d)) > maxDescriptionLength {
				return badRequest("Cannot update node with description exceeding %d characters", maxDescriptionLength)
			}
		}
	}
	if reset && !driverPatched {
		return badRequest("The reset_interfaces parameter can only be used when changing the node's driver.")
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	ident := rq.r.PathValue("node")
	for _, v := range names {
		if name, ok := v.(string); ok {
			if err := rq.checkNodeName(name, "Node "+ident+": Cannot change name to invalid name '%s'"); err != nil {
				return err
			}
		}
	}
	clearInstance := n.Maintenance && len(ops) == 1 && ops[0].Op == "remove" && ops[0].Path == "/instance_uuid"
	if !clearInstance && !statemachine.NodeUpdatable(n.ProvisionState, n.TargetProvisionState) {
		return Errorf(http.StatusConflict, "Node %s can not be updated while a state transition is in progress.", ident)
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
	if slices.Contains(changed, "driver") && n.ConsoleEnabled {
		return Errorf(http.StatusConflict, "Node %s can not update the driver while the console is enabled. Please stop the console first.", ident)
	}
	// Check every value before the node is locked, so a bad value costs
	// no lock and writes nothing.
	probe := n.Clone()
	for _, f := range changed {
		if err := rq.patchNodeField(probe, f, after); err != nil {
			return err
		}
	}
	if slices.Contains(changed, "chassis_uuid") {
		if err := rq.checkNodeChassis(n.ChassisUUID, probe.ChassisUUID); err != nil {
			return err
		}
	}
	patchedIfaces := map[string]bool{}
	for _, p := range ops {
		if f := p.rootField(); strings.HasSuffix(f, "_interface") {
			patchedIfaces[f] = true
		}
	}
	opts := conductor.UpdateOptions{ClearInstanceInMaintenance: clearInstance}
	updated, err := h.c.UpdateWith(rq.ctx, n.UUID, opts, func(cur *baremetal.Node) error {
		for _, f := range changed {
			if err := rq.patchNodeField(cur, f, after); err != nil {
				return err
			}
		}
		if reset {
			// Empty interfaces are filled with the new hardware type's
			// defaults by the conductor.
			ifs := nodeIfaces(cur)
			for _, k := range driver.Kinds() {
				if !patchedIfaces[string(k)+"_interface"] {
					ifs[k] = ""
				}
			}
			cur.SetInterfaces(ifs)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, conductor.ErrUpdateInProgress) {
			return Errorf(http.StatusConflict, "Node %s can not be updated while a state transition is in progress.", ident)
		}
		var locked *baremetal.NodeLockedError
		if errors.As(err, &locked) {
			return nodeLocked(n.UUID, locked.Holder)
		}
		if e := protectedRetiredError(err); e != nil {
			return e
		}
		return interfaceError(chassisRefusal(err))
	}
	// The copy Update returns was taken under the node's lock, released
	// since.
	updated.Reservation = ""
	return rq.reply(http.StatusOK, rq.nodeView(updated))
}

// patchNodeField sets field f of n from the patched document: a field
// the patch removed from the root is reset to its default.
func (rq *request) patchNodeField(n *baremetal.Node, f string, after map[string]any) error {
	v, present := after[f]
	if !present {
		return rq.resetNodeField(n, f)
	}
	return rq.setNodeField(n, f, v)
}

// resetNodeField sets field f to its default, as removing a root
// attribute does in Ironic's patch.
func (rq *request) resetNodeField(n *baremetal.Node, f string) error {
	switch f {
	case "uuid", "driver":
		return badRequest("'/%s' is a mandatory attribute and can not be removed", f)
	case "maintenance":
		n.Maintenance = false
	case "protected":
		n.Protected = false
	case "retired":
		n.Retired = false
	case "disable_power_off":
		n.DisablePowerOff = false
	case "automated_clean":
		n.AutomatedClean = nil
	case "conductor_group":
		n.ConductorGroup = ""
	default:
		return rq.setNodeField(n, f, nil)
	}
	return nil
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
		"chassis_uuid": nullable(n.ChassisUUID), "resource_class": nullable(n.ResourceClass),
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

// protectedRetiredError words the conductor's protected and retired
// refusals as Ironic's update_node does, or returns nil for another
// error.
func protectedRetiredError(err error) error {
	var ve *conductor.VerbError
	if errors.As(err, &ve) && errors.Is(err, conductor.ErrStateForbidsUpdate) {
		switch ve.Verb {
		case "protect":
			return Errorf(http.StatusConflict, "Node %s can only be made protected in provision states 'active' or 'rescue', the current state is %s", ve.Node, ve.State)
		case "retire":
			return Errorf(http.StatusConflict, "Node %s can not have 'retired' set in provision state 'available', the current state is '%s'", ve.Node, ve.State)
		}
		return Errorf(http.StatusConflict, "%s", ve.Reason)
	}
	var fe *baremetal.InvalidFieldError
	if errors.As(err, &fe) && (fe.Field == "protected_reason" || fe.Field == "retired_reason") {
		flag := strings.TrimSuffix(fe.Field, "_reason")
		return badRequest("The %s field can only be set when %s is True", fe.Field, flag)
	}
	return nil
}
