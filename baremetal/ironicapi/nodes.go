package ironicapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
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
// it: before 1.2 "available" was "None" (null), before 1.39 "inspect
// wait" was "inspecting".
func (rq *request) apiProvisionState(s statemachine.State) any {
	if s == statemachine.Available && !rq.v.AtLeast(2) {
		return nil
	}
	if s == statemachine.InspectWait && !rq.v.AtLeast(39) {
		return string(statemachine.Inspecting)
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
		"chassis_uuid":           nullable(m.ChassisUUID),
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
		if owner, err := rq.h.c.OwnerOfNode(n); err == nil {
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
	h.nodeStateRoutes()
	h.nodeMiscRoutes()
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

// parseLimit reads ?limit as Ironic's validate_limit: absent is the
// maximum, zero or negative is refused, larger values are capped.
func parseLimit(q url.Values) (int, error) {
	s, ok := q["limit"]
	if !ok || s[0] == "" {
		return maxListLimit, nil
	}
	l, err := strconv.Atoi(strings.TrimSpace(s[0]))
	if err != nil {
		return 0, badRequest("Expected an integer for limit: %s", s[0])
	}
	if l <= 0 {
		return 0, badRequest("Limit must be positive")
	}
	return min(l, maxListLimit), nil
}

// parseSortDir reads ?sort_dir (asc by default).
func parseSortDir(q url.Values) (string, error) {
	d, ok := q["sort_dir"]
	if !ok {
		return "asc", nil
	}
	if d[0] != "asc" && d[0] != "desc" {
		return "", badRequest("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", d[0])
	}
	return d[0], nil
}

// boolValues is how Ironic lists the accepted boolean strings.
const boolValues = "'0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"

// parseBoolParam reads a boolean query parameter as Ironic's strict
// bool_from_string.
func parseBoolParam(name, s string) (bool, error) {
	if b, ok := driver.ParseBool(s); ok {
		return b, nil
	}
	return false, badRequest("Invalid %s: Unrecognized value '%s', acceptable values are: %s", name, s, boolValues)
}

// nodeUnsortable are the fields Ironic refuses to sort by.
var nodeUnsortable = map[string]bool{
	"properties": true, "driver_info": true, "extra": true, "instance_info": true,
	"driver_internal_info": true, "clean_step": true, "deploy_step": true,
	"raid_config": true, "target_raid_config": true, "traits": true,
	"network_data": true, "service_step": true,
}

// validFaults are Ironic's fault values.
var validFaults = []string{"power failure", "clean failure", "rescue abort failure", "service failure"}

// nodeListQuery is a parsed node listing request.
type nodeListQuery struct {
	filter    baremetal.NodeFilter
	page      baremetal.Page
	fields    []string
	detail    bool
	conductor string
	// empty is set when a filter can match nothing.
	empty bool
}

// filterMinVersions gates the listing filters as Ironic's
// check_allow_* functions do.
var filterMinVersions = []struct {
	name  string
	minor int
}{
	{"provision_state", 9}, {"driver", 16}, {"resource_class", 21}, {"fault", 42},
	{"conductor_group", 46}, {"conductor", 49}, {"owner", 50}, {"lessee", 65}, {"shard", 82},
	{"sharded", 82}, {"include_children", 83}, {"parent_node", 83}, {"instance_name", 104},
}

// parseNodeListQuery reads and checks the query of a node listing in
// Ironic's order.
func (rq *request) parseNodeListQuery(detailPath bool) (*nodeListQuery, error) {
	q := rq.r.URL.Query()
	out := &nodeListQuery{detail: detailPath}
	if !detailPath {
		fields, err := rq.parseFields(nodeFieldVersions)
		if err != nil {
			return nil, err
		}
		out.fields = fields
	}
	if key := q.Get("sort_key"); key != "" {
		if minor, known := nodeFieldVersions[key]; known && !rq.v.AtLeast(minor) {
			return nil, notAcceptable("Request not acceptable.")
		}
	}
	one := func(name string) (string, bool) {
		v, ok := q[name]
		if !ok {
			return "", false
		}
		return v[0], true
	}
	for _, f := range filterMinVersions {
		if _, ok := q[f.name]; ok && !rq.v.AtLeast(f.minor) {
			switch f.name {
			case "provision_state":
				return nil, notAcceptable("Request not acceptable.")
			case "instance_name":
				return nil, notAcceptable("instance_name is not acceptable in this API version")
			}
			return nil, notAcceptable("Request not acceptable. The minimal required API version should be 1.%d", f.minor)
		}
	}
	if s, ok := one("provision_state"); ok {
		if !provisionMachine().Has(statemachine.State(s)) {
			return nil, badRequest("Provision state \"%s\" is not valid", s)
		}
		out.filter.ProvisionStates = []statemachine.State{statemachine.State(s)}
	}
	if s, ok := one("driver"); ok {
		out.filter.Drivers = []string{s}
	}
	if s, ok := one("resource_class"); ok {
		out.filter.ResourceClass = s
		out.empty = out.empty || s == ""
	}
	if s, ok := one("fault"); ok {
		if !slices.Contains(validFaults, s) {
			return nil, badRequest("Unrecognized fault \"%s\" is specified, allowed faults are ('%s')", s, strings.Join(validFaults, "', '"))
		}
		out.filter.Fault = s
	}
	if s, ok := one("conductor_group"); ok {
		g := strings.ToLower(s)
		out.filter.ConductorGroup = &g
	}
	if s, ok := one("conductor"); ok {
		out.conductor = s
	}
	if s, ok := one("owner"); ok {
		out.filter.Owner = s
		out.empty = out.empty || s == ""
	}
	if s, ok := one("lessee"); ok {
		out.filter.Lessee = s
		out.empty = out.empty || s == ""
	}
	if vals, ok := q["shard"]; ok {
		for _, v := range vals {
			for _, sh := range strings.Split(v, ",") {
				if sh = strings.TrimSpace(sh); sh != "" {
					out.filter.Shards = append(out.filter.Shards, sh)
				}
			}
		}
		out.empty = out.empty || len(out.filter.Shards) == 0
	}
	if s, ok := one("description_contains"); ok && s != "" {
		out.filter.DescriptionContains = s
	}
	if s, ok := one("project"); ok && s != "" {
		out.filter.Project = s
	}
	if s, ok := one("instance_name"); ok {
		out.filter.InstanceName = s
		out.empty = out.empty || s == ""
	}
	var includeChildren *bool
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"maintenance", &out.filter.Maintenance}, {"associated", &out.filter.Associated}, {"retired", &out.filter.Retired},
		{"sharded", &out.filter.Sharded}, {"include_children", &includeChildren}} {
		if s, ok := one(b.name); ok {
			v, err := parseBoolParam(b.name, s)
			if err != nil {
				return nil, err
			}
			*b.dst = &v
		}
	}
	// As Ironic, listings hide child nodes unless include_children is
	// set; parent_node lists one node's children.
	if includeChildren == nil || !*includeChildren {
		parent := ""
		if s, ok := one("parent_node"); ok {
			if s == "" {
				out.empty = true
			}
			parent = s
			if looksLikeUUID(s) {
				parent = strings.ToLower(s)
			}
		}
		out.filter.ParentNode = &parent
	}
	if s, ok := one("instance_uuid"); ok {
		if !looksLikeUUID(s) {
			return nil, badRequest("Expected UUID for instance_uuid: %s", s)
		}
		out.filter.InstanceUUID = s
	}
	chassis, err := rq.nodeChassisFilter()
	if err != nil {
		return nil, err
	}
	out.filter.ChassisUUID = chassis
	if s, ok := one("detail"); ok {
		if detailPath {
			return nil, badRequest("Unknown argument: \"detail\"")
		}
		if !rq.v.AtLeast(43) {
			return nil, badRequest("Invalid query parameter ?detail=%s received.", s)
		}
		d, err := parseBoolParam("detail", s)
		if err != nil {
			return nil, err
		}
		if out.fields != nil && d {
			return nil, badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		out.detail = d
	}
	limit, err := parseLimit(q)
	if err != nil {
		return nil, err
	}
	dir, err := parseSortDir(q)
	if err != nil {
		return nil, err
	}
	key := "id"
	if k, ok := one("sort_key"); ok {
		key = k
	}
	if nodeUnsortable[key] {
		return nil, badRequest("The sort_key value %s is an invalid field for sorting", key)
	}
	if !slices.Contains(baremetal.NodeSortKeys(), key) {
		return nil, badRequest("The sort_key value \"%s\" is an invalid field for sorting", key)
	}
	out.page = baremetal.Page{Limit: limit, SortKey: key, SortDesc: dir == "desc"}
	if key == "id" {
		out.page.SortKey = ""
	}
	if m, ok := one("marker"); ok && m != "" {
		if !looksLikeUUID(m) {
			return nil, badRequest("Expected UUID for marker: %s", m)
		}
		out.page.Marker = strings.ToLower(m)
	}
	return out, nil
}

// GET /v1/nodes and /v1/nodes/detail
func (h *Handler) listNodes(detailPath bool) handlerFunc {
	return func(rq *request) error {
		lq, err := rq.parseNodeListQuery(detailPath)
		if err != nil {
			return err
		}
		var nodes []*baremetal.Node
		if !lq.empty {
			if lq.page.Marker != "" {
				if _, err := h.store.GetNode(rq.ctx, lq.page.Marker); err != nil {
					if e := toError(err); e.Status == http.StatusNotFound {
						return notFound("Node %s could not be found.", lq.page.Marker)
					}
					return err
				}
			}
			nodes, err = h.store.ListNodes(rq.ctx, lq.filter, lq.page)
			if err != nil {
				return err
			}
		}
		full := len(nodes) == lq.page.Limit
		last := ""
		if len(nodes) > 0 {
			last = nodes[len(nodes)-1].UUID
		}
		if lq.conductor != "" {
			// As Ironic, the conductor filter applies to the page read.
			kept := nodes[:0]
			for _, n := range nodes {
				if owner, err := h.c.NodeOwner(rq.ctx, n.UUID); err == nil && owner == lq.conductor {
					kept = append(kept, n)
				}
			}
			nodes = kept
		}
		fields := lq.fields
		if fields == nil && !lq.detail {
			fields = nodeListFields
		}
		out := make([]map[string]any, 0, len(nodes))
		for _, n := range nodes {
			out = append(out, filterView(rq.nodeView(n), fields))
		}
		body := map[string]any{"nodes": out}
		if full && last != "" && lq.filter.InstanceUUID == "" {
			res := "nodes"
			if rq.r.PathValue("chassis") != "" {
				res = "chassis/" + lq.filter.ChassisUUID + "/nodes"
			}
			if detailPath {
				res += "/detail"
			}
			body["next"] = rq.nextURL(res, last, lq.page.Limit)
		}
		return rq.reply(http.StatusOK, body)
	}
}

// nodeLocked is Ironic's NodeLocked (409, with Retry-After).
func nodeLocked(node, host string) *Error {
	return &Error{Status: http.StatusConflict, RetryAfter: lockRetryAfter,
		Message: "Node " + node + " is locked by host " + host + ", please retry after the current operation is completed."}
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
