package ironicapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
)

func itoa(i int) string { return strconv.Itoa(i) }

// nodeFieldVersions are the node fields with the microversion that
// introduced each (Ironic's versions.py history); fields at 1 exist at
// every version.
var nodeFieldVersions = map[string]int{
	"uuid": 1, "instance_uuid": 1, "driver": 1, "driver_info": 1, "extra": 1,
	"instance_info": 1, "properties": 1, "power_state": 1, "target_power_state": 1,
	"provision_state": 1, "target_provision_state": 1, "provision_updated_at": 1,
	"maintenance": 1, "maintenance_reason": 1, "last_error": 1, "reservation": 1,
	"console_enabled": 1, "chassis_uuid": 1, "created_at": 1, "updated_at": 1,
	"links": 1, "ports": 1,
	"driver_internal_info": 3, "name": 5,
	"inspection_started_at": 6, "inspection_finished_at": 6,
	"clean_step": 7, "raid_config": 12, "target_raid_config": 12, "states": 14,
	"network_interface": 20, "resource_class": 21, "portgroups": 24,
	"boot_interface": 31, "console_interface": 31, "deploy_interface": 31,
	"inspect_interface": 31, "management_interface": 31, "power_interface": 31,
	"raid_interface": 31, "vendor_interface": 31,
	"volume": 32, "storage_interface": 33, "traits": 37, "rescue_interface": 38,
	"bios_interface": 40, "fault": 42, "deploy_step": 44, "conductor_group": 46,
	"automated_clean": 47, "protected": 48, "protected_reason": 48, "conductor": 49,
	"owner": 50, "description": 51, "allocation_uuid": 52, "retired": 61,
	"retired_reason": 61, "lessee": 65, "network_data": 66, "boot_mode": 75,
	"secure_boot": 75, "shard": 82, "parent_node": 83, "firmware_interface": 86,
	"service_step": 87, "disable_power_off": 95, "instance_name": 104, "health": 109,
}

// nodeListFields are the fields of a node in a listing without detail
// (Ironic's _DEFAULT_RETURN_FIELDS, plus links).
var nodeListFields = []string{"uuid", "instance_uuid", "maintenance", "power_state", "provision_state", "name", "links"}

// apiProvisionState is the provision state as a client of version v sees
// it: before 1.2 "available" was "None" (null).
func (rq *request) apiProvisionState(s statemachine.State) any {
	if s == statemachine.Available && !rq.v.AtLeast(2) {
		return nil
	}
	return nullable(s)
}

// nodeView is node n as Ironic's API shows it at the request's version:
// secrets masked, fields newer than the version left out.
func (rq *request) nodeView(n *baremetal.Node) map[string]any {
	m := n.Masked()
	traits := m.Traits
	if traits == nil {
		traits = []string{}
	}
	var secureBoot any
	if m.SecureBoot != nil {
		secureBoot = *m.SecureBoot
	}
	var automatedClean any
	if m.AutomatedClean != nil {
		automatedClean = *m.AutomatedClean
	}
	view := map[string]any{
		"uuid":                   m.UUID,
		"name":                   nullable(m.Name),
		"instance_uuid":          nullable(m.InstanceUUID),
		"instance_name":          nullable(m.InstanceName),
		"driver":                 m.Driver,
		"driver_info":            object(m.DriverInfo),
		"driver_internal_info":   object(m.DriverInternalInfo),
		"extra":                  object(m.Extra),
		"instance_info":          object(m.InstanceInfo),
		"properties":             object(m.Properties),
		"power_state":            nullable(m.PowerState),
		"target_power_state":     nullable(m.TargetPowerState),
		"provision_state":        rq.apiProvisionState(m.ProvisionState),
		"target_provision_state": nullable(m.TargetProvisionState),
		"provision_updated_at":   timestamp(m.ProvisionUpdatedAt),
		"maintenance":            m.Maintenance,
		"maintenance_reason":     nullable(m.MaintenanceReason),
		"fault":                  nullable(m.Fault),
		"last_error":             nullable(m.LastError),
		"reservation":            nullable(m.Reservation),
		"console_enabled":        m.ConsoleEnabled,
		"chassis_uuid":           nil,
		"created_at":             timestamp(m.CreatedAt),
		"updated_at":             timestamp(m.UpdatedAt),
		"inspection_started_at":  timestamp(m.InspectionStartedAt),
		"inspection_finished_at": timestamp(m.InspectionFinishedAt),
		"clean_step":             object(m.CleanStep),
		"deploy_step":            object(m.DeployStep),
		"service_step":           object(m.ServiceStep),
		"raid_config":            object(m.RAIDConfig),
		"target_raid_config":     object(m.TargetRAIDConfig),
		"network_data":           object(m.NetworkData),
		"resource_class":         nullable(m.ResourceClass),
		"bios_interface":         nullable(m.BIOSInterface),
		"boot_interface":         nullable(m.BootInterface),
		"console_interface":      nullable(m.ConsoleInterface),
		"deploy_interface":       nullable(m.DeployInterface),
		"firmware_interface":     nullable(m.FirmwareInterface),
		"inspect_interface":      nullable(m.InspectInterface),
		"management_interface":   nullable(m.ManagementInterface),
		"network_interface":      nullable(m.NetworkInterface),
		"power_interface":        nullable(m.PowerInterface),
		"raid_interface":         nullable(m.RAIDInterface),
		"rescue_interface":       nullable(m.RescueInterface),
		"storage_interface":      nullable(m.StorageInterface),
		"vendor_interface":       nullable(m.VendorInterface),
		"traits":                 traits,
		"conductor_group":        m.ConductorGroup,
		"automated_clean":        automatedClean,
		"protected":              m.Protected,
		"protected_reason":       nullable(m.ProtectedReason),
		"owner":                  nullable(m.Owner),
		"lessee":                 nullable(m.Lessee),
		"description":            nullable(m.Description),
		"allocation_uuid":        nullable(m.AllocationUUID),
		"retired":                m.Retired,
		"retired_reason":         nullable(m.RetiredReason),
		"boot_mode":              nullable(m.BootMode),
		"secure_boot":            secureBoot,
		"shard":                  nullable(m.Shard),
		"parent_node":            nullable(m.ParentNode),
		"disable_power_off":      m.DisablePowerOff,
		"health":                 nullable(m.Health),
		"links":                  rq.links("nodes", m.UUID),
		"ports":                  rq.links("nodes", m.UUID+"/ports"),
		"portgroups":             rq.links("nodes", m.UUID+"/portgroups"),
		"states":                 rq.links("nodes", m.UUID+"/states"),
		"volume":                 rq.links("nodes", m.UUID+"/volume"),
	}
	if rq.v.AtLeast(49) {
		if owner, err := rq.h.c.NodeOwner(rq.ctx, m.UUID); err == nil {
			view["conductor"] = nullable(owner)
		} else {
			view["conductor"] = nil
		}
	}
	rq.hideNewer(view, nodeFieldVersions)
	return view
}

func (h *Handler) nodeRoutes() {
	h.handle("GET /v1/nodes", route{}, h.listNodes(false))
	h.handle("GET /v1/nodes/detail", route{}, h.listNodes(true))
	h.handle("GET /v1/nodes/{node}", route{}, h.getNode)
	h.handle("POST /v1/nodes", route{}, h.createNode)
	h.handle("DELETE /v1/nodes/{node}", route{}, h.deleteNode)
	h.handle("PATCH /v1/nodes/{node}", route{}, h.patchNode)
}

// getNodeByIdent finds the node the path names, by UUID or (1.5) name.
func (rq *request) node() (*baremetal.Node, error) {
	ident := rq.r.PathValue("node")
	if !rq.v.AtLeast(5) && !looksLikeUUID(ident) {
		return nil, notFound("Node %s could not be found.", ident)
	}
	n, err := rq.h.store.GetNode(rq.ctx, ident)
	if err != nil {
		if e := toError(err); e.Status == http.StatusNotFound {
			return nil, notFound("Node %s could not be found.", ident)
		}
		return nil, err
	}
	return n, nil
}

func looksLikeUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// GET /v1/nodes/{node}
func (h *Handler) getNode(rq *request) error {
	fields, err := rq.parseFields(nodeFieldVersions)
	if err != nil {
		return err
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.nodeView(n), fields))
}

// maxListLimit is Ironic's [api]max_limit.
const maxListLimit = 1000

// GET /v1/nodes and /v1/nodes/detail
func (h *Handler) listNodes(detail bool) handlerFunc {
	return func(rq *request) error {
		fields, err := rq.parseFields(nodeFieldVersions)
		if err != nil {
			return err
		}
		if detail && fields != nil {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		q := rq.r.URL.Query()
		limit := maxListLimit
		if s := q.Get("limit"); s != "" {
			l, err := strconv.Atoi(s)
			if err != nil || l < 0 {
				return badRequest("Limit must be positive")
			}
			if l > 0 && l < limit {
				limit = l
			}
		}
		nodes, err := h.store.ListNodes(rq.ctx, baremetal.NodeFilter{}, baremetal.Page{Limit: limit, Marker: q.Get("marker")})
		if err != nil {
			return err
		}
		if fields == nil && !detail {
			fields = nodeListFields
		}
		out := make([]map[string]any, 0, len(nodes))
		for _, n := range nodes {
			out = append(out, filterView(rq.nodeView(n), fields))
		}
		body := map[string]any{"nodes": out}
		if len(nodes) == limit && limit > 0 {
			res := "nodes"
			if detail {
				res = "nodes/detail"
			}
			body["next"] = rq.nextURL(res, nodes[len(nodes)-1].UUID, limit)
		}
		return rq.reply(http.StatusOK, body)
	}
}

// DELETE /v1/nodes/{node}
func (h *Handler) deleteNode(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.c.Delete(rq.ctx, n.UUID); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}
