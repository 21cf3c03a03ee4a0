package ironicapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
)

// portFieldVersions are the port fields with the microversion that
// introduced each (Ironic's port.hide_fields_in_newer_versions).
var portFieldVersions = map[string]int{
	"uuid": 1, "address": 1, "node_uuid": 1, "extra": 1, "created_at": 1, "updated_at": 1, "links": 1,
	"internal_info": 18, "pxe_enabled": 19, "local_link_connection": 19, "portgroup_uuid": 24,
	"physical_network": 34, "is_smartnic": 53, "name": 88, "description": 97, "vendor": 100, "category": 101,
	"available_for_dynamic_portgroup": 111,
}

// portListFields are the fields of a port in a listing without detail.
var portListFields = []string{"uuid", "address", "links"}

// portWritable are the fields a port create or PATCH may set (Ironic's
// PORT_SCHEMA and PATCH_ALLOWED_FIELDS), in Ironic's order for its error
// message.
var portWritable = []string{"address", "extra", "is_smartnic", "local_link_connection", "node_ident",
	"node_uuid", "physical_network", "portgroup_uuid", "pxe_enabled", "name", "description", "vendor", "category",
	"available_for_dynamic_portgroup"}

// maxFilterValues bounds the values of one list filter (shard,
// conductor_groups): each is a parameter of the store's query.
const maxFilterValues = 100

// portInvalidSortKeys are the fields Ironic refuses to sort ports by.
var portInvalidSortKeys = []string{"extra", "internal_info", "local_link_connection"}

// localLinkOVNKeys are the local_link_connection keys of API 1.90 to
// 1.104 (OVN VTEP switches).
var localLinkOVNKeys = []string{"vtep-logical-switch", "vtep-physical-switch"}

// portConnectivityStates are where a port's connectivity fields may
// change outside maintenance (Ironic's update_port).
var portConnectivityStates = []statemachine.State{statemachine.Enroll, statemachine.Inspecting, statemachine.InspectWait, statemachine.Manageable}

// portVIFKeys are the internal_info keys naming a VIF bound to a port.
var portVIFKeys = []string{"cleaning_vif_port_id", "provisioning_vif_port_id", "rescuing_vif_port_id",
	"inspection_vif_port_id", "servicing_vif_port_id", "tenant_vif_port_id"}

func (h *Handler) portRoutes() {
	h.handle("GET /v1/ports", route{}, h.listPorts(false, parentNone))
	h.handle("GET /v1/ports/detail", route{}, h.listPorts(true, parentNone))
	h.handle("GET /v1/nodes/{node}/ports", route{}, h.listPorts(false, parentNode))
	h.handle("GET /v1/nodes/{node}/ports/detail", route{}, h.listPorts(true, parentNode))
	h.handle("GET /v1/portgroups/{portgroup}/ports", route{minVersion: 24}, h.listPorts(false, parentPortgroup))
	h.handle("GET /v1/portgroups/{portgroup}/ports/detail", route{minVersion: 24}, h.listPorts(true, parentPortgroup))
	h.handle("GET /v1/ports/{port}", route{}, h.getPort)
	h.handle("POST /v1/ports", route{}, h.createPort)
	h.handle("PATCH /v1/ports/{port}", route{}, h.patchPort)
	h.handle("DELETE /v1/ports/{port}", route{}, h.deletePort)
}

// portView is port p as Ironic's API shows it at the request's version.
func (rq *request) portView(p *baremetal.Port) map[string]any {
	llc := object(p.LocalLinkConnection)
	if !rq.v.AtLeast(90) || rq.v.AtLeast(105) {
		for _, k := range localLinkOVNKeys {
			if _, ok := llc[k]; ok {
				// Clients of these versions expect the key, but cannot
				// read an OVN VTEP link: Ironic shows it empty.
				llc = map[string]any{}
				break
			}
		}
	}
	view := map[string]any{
		"uuid":                            p.UUID,
		"address":                         p.Address,
		"node_uuid":                       p.NodeUUID,
		"extra":                           object(p.Extra),
		"internal_info":                   object(p.InternalInfo),
		"pxe_enabled":                     p.PXEEnabled,
		"local_link_connection":           llc,
		"portgroup_uuid":                  portgroupOf(p),
		"physical_network":                nullable(p.PhysicalNetwork),
		"is_smartnic":                     p.IsSmartNIC,
		"name":                            nullable(p.Name),
		"description":                     nullable(p.Description),
		"vendor":                          nullable(p.Vendor),
		"category":                        nullable(p.Category),
		"available_for_dynamic_portgroup": !p.NotForDynamicPortgroup,
		"created_at":                      timestamp(p.CreatedAt),
		"updated_at":                      timestamp(p.UpdatedAt),
		"links":                           rq.links("ports", p.UUID),
	}
	rq.hideNewer(view, portFieldVersions)
	return view
}

// portgroupOf is the port's portgroup UUID, or null.
func portgroupOf(p *baremetal.Port) any { return nullable(p.PortgroupUUID) }

// checkPortFieldVersions refuses (406) fields newer than the request's
// version, as Ironic's _check_allowed_port_fields.
func (rq *request) checkPortFieldVersions(fields []string) error {
	for _, f := range fields {
		if minor, ok := portFieldVersions[f]; ok && !rq.v.AtLeast(minor) {
			return notAcceptable("Request not acceptable.")
		}
		if f == "local_link_connection/network_type" && !rq.v.AtLeast(64) {
			return notAcceptable("Request not acceptable.")
		}
	}
	return nil
}

// ironicName is Ironic's logical name pattern (utils.is_valid_logical_name).
var ironicName = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

// port finds the port the path names: by UUID, MAC address or name.
func (rq *request) port() (*baremetal.Port, error) {
	ident := rq.r.PathValue("port")
	if !looksLikeUUID(ident) && !ironicName.MatchString(ident) {
		return nil, badRequest("Expected UUID or name for port_ident: %s", ident)
	}
	var p *baremetal.Port
	var err error
	if _, merr := baremetal.NormalizeMAC("address", ident); looksLikeUUID(ident) || merr == nil {
		p, err = rq.h.store.GetPort(rq.ctx, ident)
	} else {
		var ps []*baremetal.Port
		ps, err = rq.h.store.QueryPorts(rq.ctx, baremetal.PortQuery{Name: ident}, baremetal.Page{Limit: 1})
		if err == nil && len(ps) == 0 {
			err = &baremetal.NotFoundError{Kind: "port", Ident: ident}
		}
		if err == nil {
			p = ps[0]
		}
	}
	if errors.Is(err, baremetal.ErrNotFound) {
		return nil, notFound("Port %s could not be found.", ident)
	}
	return p, err
}

// queryBool reads a boolean query parameter as Ironic's args.boolean.
func queryBool(name, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, nil
	case "0", "f", "false", "off", "n", "no":
		return false, nil
	}
	return false, badRequest("Invalid %s: Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", name, s)
}

// queryList reads a comma-separated list parameter.
func queryList(raw []string) []string {
	var out []string
	for _, part := range raw {
		for _, s := range strings.Split(part, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// listPage reads limit, sort_dir and sort_key (checked by sortOK) as
// Ironic's validate_limit and validate_sort_dir.
func (rq *request) listPage() (limit int, sortKey string, desc bool, err error) {
	q := rq.r.URL.Query()
	limit = maxListLimit
	if s, ok := q["limit"]; ok {
		l, perr := strconv.Atoi(s[0])
		if perr != nil {
			return 0, "", false, badRequest("Expected an integer for limit: %s", s[0])
		}
		if l <= 0 {
			return 0, "", false, badRequest("Limit must be positive")
		}
		limit = min(l, maxListLimit)
	}
	dir := q.Get("sort_dir")
	if _, ok := q["sort_dir"]; !ok {
		dir = "asc"
	}
	if dir != "asc" && dir != "desc" {
		return 0, "", false, badRequest("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", dir)
	}
	sortKey = q.Get("sort_key")
	if sortKey == "" {
		sortKey = "id"
	}
	return limit, sortKey, dir == "desc", nil
}

// The resource a port listing is under.
type portParent int

const (
	parentNone portParent = iota
	parentNode
	parentPortgroup
)

// GET /v1/ports, /v1/ports/detail, /v1/nodes/{node}/ports(/detail),
// /v1/portgroups/{portgroup}/ports(/detail)
func (h *Handler) listPorts(detailPath bool, parent portParent) handlerFunc {
	underNode := parent == parentNode
	return func(rq *request) error {
		q := rq.r.URL.Query()
		fields, err := rq.parseFields(portFieldVersions)
		if err != nil {
			return err
		}
		var detail *bool
		if s, ok := q["detail"]; ok {
			if detailPath {
				return badRequest("Unknown argument: \"detail\"")
			}
			b, err := queryBool("detail", s[0])
			if err != nil {
				return err
			}
			if !rq.v.AtLeast(43) {
				return badRequest("Invalid query parameter ?detail=%s received.", s[0])
			}
			detail = &b
		}
		if detailPath && fields != nil {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		if fields != nil && detail != nil && *detail {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		limit, sortKey, desc, err := rq.listPage()
		if err != nil {
			return err
		}
		if err := rq.checkPortFieldVersions([]string{sortKey}); err != nil {
			return err
		}
		if slices.Contains(portInvalidSortKeys, sortKey) || !baremetal.ValidPortSortKey(sortKey) {
			return badRequest("The sort_key value %s is an invalid field for sorting", sortKey)
		}
		var marker string
		if m := q.Get("marker"); m != "" {
			if !looksLikeUUID(m) {
				return badRequest("Expected UUID for marker: %s", m)
			}
			if _, err := h.store.GetPort(rq.ctx, m); err != nil {
				if errors.Is(err, baremetal.ErrNotFound) {
					return notFound("Port %s could not be found.", m)
				}
				return err
			}
			marker = m
		}

		pq := baremetal.PortQuery{SortKey: sortKey, Descending: desc, DescriptionContains: q.Get("description_contains")}
		nodeIdent := q.Get("node_uuid")
		if nodeIdent != "" && !looksLikeUUID(nodeIdent) {
			return badRequest("Expected UUID for node_uuid: %s", nodeIdent)
		}
		if nodeIdent == "" {
			nodeIdent = q.Get("node")
		}
		resource := "ports"
		if underNode {
			nodeIdent = rq.r.PathValue("node")
		}
		portgroup := q.Get("portgroup")
		if parent == parentPortgroup {
			portgroup = rq.r.PathValue("portgroup")
		}
		if portgroup != "" && !rq.v.AtLeast(24) {
			return notAcceptable("Request not acceptable.")
		}
		shards := queryList(q["shard"])
		if _, ok := q["shard"]; ok && !rq.v.AtLeast(82) {
			return notAcceptable("Request not acceptable. The minimal required API version should be 1.82")
		}
		groups := queryList(q["conductor_groups"])
		if _, ok := q["conductor_groups"]; ok && !rq.v.AtLeast(99) {
			return notAcceptable("Request not acceptable.")
		}
		for _, l := range [][]string{shards, groups} {
			if len(l) > maxFilterValues {
				return badRequest("At most %d shards or conductor groups can be filtered on; %d were given.", maxFilterValues, len(l))
			}
		}
		exclusive := 0
		for _, set := range []bool{nodeIdent != "", portgroup != "", len(shards) > 0} {
			if set {
				exclusive++
			}
		}
		if exclusive > 1 {
			return Errorf(http.StatusForbidden, "Operation not permitted.")
		}
		address := q.Get("address")
		if address != "" {
			if _, err := baremetal.NormalizeMAC("address", address); err != nil {
				return badRequest("Expected valid MAC address for address: %s", address)
			}
		}
		if len(groups) > 0 && (nodeIdent != "" || portgroup != "" || address != "") {
			return badRequest("Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.")
		}
		// As Ironic, one filter applies: portgroup, else node, else
		// address, else shard, else conductor groups.
		switch {
		case portgroup != "":
			g, err := h.store.Portgroups().Get(rq.ctx, portgroup)
			if errors.Is(err, baremetal.ErrNotFound) || errors.Is(err, baremetal.ErrInvalidInput) {
				return notFound("Portgroup %s could not be found.", portgroup)
			}
			if err != nil {
				return err
			}
			pq.PortgroupUUID = g.UUID
			if parent == parentPortgroup {
				resource = "portgroups/" + g.UUID + "/ports"
			}
		case nodeIdent != "":
			var n *baremetal.Node
			if underNode {
				n, err = rq.node()
			} else {
				n, err = rq.nodeByIdent(nodeIdent)
			}
			if err != nil {
				return err
			}
			pq.NodeUUID = n.UUID
			if underNode {
				resource = "nodes/" + n.UUID + "/ports"
			}
		case address != "":
			// Ironic's lookup by address takes no other filter.
			pq.Address = address
			pq.DescriptionContains = ""
		case len(shards) > 0:
			pq.Shards = shards
		default:
			pq.ConductorGroups = groups
		}
		if detailPath {
			resource += "/detail"
		}
		ports, err := h.store.QueryPorts(rq.ctx, pq, baremetal.Page{Limit: limit, Marker: marker})
		if err != nil {
			return err
		}
		if fields == nil && !detailPath && (detail == nil || !*detail) {
			fields = portListFields
		}
		out := make([]map[string]any, 0, len(ports))
		for _, p := range ports {
			out = append(out, filterView(rq.portView(p), fields))
		}
		body := map[string]any{"ports": out}
		if len(ports) > 0 && len(ports) == limit {
			body["next"] = rq.nextURL(resource, ports[len(ports)-1].UUID, limit)
		}
		return rq.reply(http.StatusOK, body)
	}
}

// GET /v1/ports/{port}
func (h *Handler) getPort(rq *request) error {
	fields, err := rq.parseFields(portFieldVersions)
	if err != nil {
		return err
	}
	p, err := rq.port()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.portView(p), fields))
}

// portDoc is a port's writable fields as a JSON document: what a PATCH
// applies to, and the shape a create body is checked in.
func portDoc(p *baremetal.Port) map[string]any {
	return map[string]any{
		"uuid": p.UUID, "address": p.Address, "node_uuid": p.NodeUUID,
		"extra": object(p.Extra), "is_smartnic": p.IsSmartNIC,
		"local_link_connection": object(p.LocalLinkConnection),
		"physical_network":      nullable(p.PhysicalNetwork), "portgroup_uuid": portgroupOf(p),
		"pxe_enabled": p.PXEEnabled, "name": nullable(p.Name), "description": nullable(p.Description),
		"vendor": nullable(p.Vendor), "category": nullable(p.Category),
		"available_for_dynamic_portgroup": !p.NotForDynamicPortgroup,
	}
}

// portSchemaError is Ironic's wording of a port document that fails its
// JSON schema.
func portSchemaError(format string, args ...any) *Error {
	return badRequest("Schema error for port: "+format, args...)
}

// setPortFields validates doc as Ironic's PORT_SCHEMA and its field
// validators and writes it onto p. node_uuid/node_ident are handled by
// the caller.
func (rq *request) setPortFields(p *baremetal.Port, doc map[string]any) error {
	str := func(field string, max int, nullOK bool) (string, error) {
		v, ok := doc[field]
		if !ok {
			return "", nil
		}
		switch t := v.(type) {
		case nil:
			if nullOK {
				return "", nil
			}
		case string:
			if max > 0 && len([]rune(t)) > max {
				return "", portSchemaError("'%s' is too long", t)
			}
			return t, nil
		}
		return "", portSchemaError("%s is not of type 'string'", portJSON(v))
	}
	boolean := func(field string, def bool) (bool, error) {
		v, ok := doc[field]
		if !ok || v == nil {
			return def, nil
		}
		switch t := v.(type) {
		case bool:
			return t, nil
		case string:
			return queryBool(field, t)
		}
		return false, portSchemaError("%s is not of type 'string', 'boolean', 'null'", portJSON(v))
	}
	obj := func(field string) (map[string]any, error) {
		v, ok := doc[field]
		if !ok || v == nil {
			return nil, nil
		}
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
		return nil, portSchemaError("%s is not of type 'object', 'null'", portJSON(v))
	}
	var err error
	addr, err := str("address", 0, false)
	if err != nil {
		return err
	}
	if p.Address, err = baremetal.NormalizeMAC("address", addr); err != nil {
		return badRequest("Expected valid MAC address for address: %s", addr)
	}
	if u, ok := doc["uuid"]; ok && u != nil {
		s, isStr := u.(string)
		if !isStr || !looksLikeUUID(s) {
			return badRequest("Expected UUID for uuid: %v", u)
		}
		p.UUID = strings.ToLower(s)
	}
	if p.Name, err = str("name", 0, true); err != nil {
		return err
	}
	if p.PhysicalNetwork, err = str("physical_network", 64, true); err != nil {
		return err
	}
	if p.Description, err = str("description", 255, true); err != nil {
		return err
	}
	if p.Vendor, err = str("vendor", 32, true); err != nil {
		return err
	}
	if p.Category, err = str("category", 80, true); err != nil {
		return err
	}
	if p.PXEEnabled, err = boolean("pxe_enabled", true); err != nil {
		return err
	}
	if p.IsSmartNIC, err = boolean("is_smartnic", false); err != nil {
		return err
	}
	// available_for_dynamic_portgroup (1.111) is a JSON boolean only.
	p.NotForDynamicPortgroup = false
	if v, ok := doc["available_for_dynamic_portgroup"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return portSchemaError("%s is not of type 'boolean'", portJSON(v))
		}
		p.NotForDynamicPortgroup = !b
	}
	if p.Extra, err = obj("extra"); err != nil {
		return err
	}
	llc, err := obj("local_link_connection")
	if err != nil {
		return err
	}
	if p.LocalLinkConnection, err = checkLocalLink(llc); err != nil {
		return err
	}
	p.PortgroupUUID = ""
	if pg, ok := doc["portgroup_uuid"]; ok && pg != nil {
		s, isStr := pg.(string)
		if !isStr || !looksLikeUUID(s) {
			return badRequest("Expected UUID for portgroup_uuid: %v", pg)
		}
		p.PortgroupUUID = strings.ToLower(s)
	}
	return nil
}

// portPortgroup checks the portgroup p joins: it exists (else Ironic's
// 400 PortgroupNotFound) and belongs to p's node. It returns nil for no
// portgroup.
func (rq *request) portPortgroup(p *baremetal.Port) (*baremetal.Portgroup, error) {
	if p.PortgroupUUID == "" {
		return nil, nil
	}
	g, err := rq.h.store.Portgroups().Get(rq.ctx, p.PortgroupUUID)
	if errors.Is(err, baremetal.ErrNotFound) {
		return nil, badRequest("Portgroup %s could not be found.", p.PortgroupUUID)
	}
	if err != nil {
		return nil, err
	}
	if g.NodeUUID != p.NodeUUID {
		return nil, badRequest("Port can not be added to a portgroup belonging to a different node.")
	}
	return g, nil
}

// checkPortgroupPhysnet is Ironic's validate_port_physnet: the ports of a
// port group share one physical network, so a port joining g (created in
// it, moved to it, or with its physical network changed) must have the
// physical network of g's other ports (409). Other ports of g that
// already disagree make any such change a 409 too.
func (rq *request) checkPortgroupPhysnet(p *baremetal.Port, g *baremetal.Portgroup) error {
	if g == nil {
		return nil
	}
	ports, err := rq.h.store.ListPorts(rq.ctx, p.NodeUUID)
	if err != nil {
		return err
	}
	nets := map[string]bool{}
	for _, o := range ports {
		if o.PortgroupUUID == g.UUID && o.UUID != p.UUID {
			nets[o.PhysicalNetwork] = true
		}
	}
	if len(nets) == 0 {
		return nil
	}
	if len(nets) > 1 {
		names := make([]string, 0, len(nets))
		for n := range nets {
			names = append(names, n)
		}
		slices.Sort(names)
		return Errorf(http.StatusConflict, "Port group %s has member ports with inconsistent physical networks (%s). All ports in a port group must have the same physical network.", g.UUID, strings.Join(names, ", "))
	}
	for n := range nets {
		if n != p.PhysicalNetwork {
			return Errorf(http.StatusConflict, "Port with physical network %s cannot become a member of port group %s which has ports in physical network %s.", physnetText(p.PhysicalNetwork), g.UUID, physnetText(n))
		}
	}
	return nil
}

// physnetText is a physical network as Ironic prints it (None when
// unset).
func physnetText(n string) string {
	if n == "" {
		return "None"
	}
	return n
}

// portJSON is v as JSON text, for error messages.
func portJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// datapathID is an OpenFlow datapath ID: 16 hexadecimal digits, with an
// optional 0x.
var datapathID = regexp.MustCompile(`^(0x)?[0-9a-fA-F]{16}$`)

// checkLocalLink validates a local_link_connection as Ironic's
// LOCAL_LINK_CONN_SCHEMA (one of: port_id and switch_id; port_id and
// hostname (Smart NIC); network_type unmanaged; an OVN VTEP link; empty),
// and normalises switch_id (a MAC address or an OpenFlow datapath ID).
func checkLocalLink(llc map[string]any) (map[string]any, error) {
	if len(llc) == 0 {
		return llc, nil
	}
	known := []string{"port_id", "switch_id", "hostname", "switch_info", "network_type", "vtep-logical-switch", "vtep-physical-switch"}
	for k, v := range llc {
		if !slices.Contains(known, k) {
			return nil, badRequest("Schema error for local_link_connection: Additional properties are not allowed ('%s' was unexpected)", k)
		}
		if _, ok := v.(string); !ok {
			return nil, badRequest("Schema error for local_link_connection: %s is not of type 'string'", portJSON(v))
		}
	}
	has := func(k string) bool { _, ok := llc[k]; return ok }
	if nt, ok := llc["network_type"]; ok && nt != "managed" && nt != "unmanaged" {
		return nil, badRequest("Schema error for local_link_connection: '%s' is not one of ['managed', 'unmanaged']", nt)
	}
	if has("vtep-logical-switch") != has("vtep-physical-switch") {
		return nil, badRequest("Schema error for local_link_connection: 'vtep-logical-switch' and 'vtep-physical-switch' are required together")
	}
	ok := (has("port_id") && has("switch_id")) || (has("port_id") && has("hostname")) ||
		llc["network_type"] == "unmanaged" || (has("port_id") && has("vtep-logical-switch"))
	if !ok {
		return nil, badRequest("Schema error for local_link_connection: %s is not valid under any of the given schemas", portJSON(llc))
	}
	out := make(map[string]any, len(llc))
	for k, v := range llc {
		out[k] = v
	}
	if sw, ok := llc["switch_id"].(string); ok {
		if mac, err := baremetal.NormalizeMAC("switch_id", sw); err == nil {
			out["switch_id"] = mac
		} else if datapathID.MatchString(sw) {
			out["switch_id"] = strings.ToLower(sw)
		} else {
			return nil, badRequest("Expected a MAC address or OpenFlow datapath ID but received %s.", sw)
		}
	}
	return out, nil
}

// checkPortBodyVersions refuses (406) body fields newer than the request,
// and local_link_connection keys newer than it (network_type 1.64, the
// OVN VTEP keys 1.90 to 1.104).
func (rq *request) checkPortBodyVersions(doc map[string]any) error {
	fields := make([]string, 0, len(doc))
	for k := range doc {
		fields = append(fields, k)
	}
	if err := rq.checkPortFieldVersions(fields); err != nil {
		return err
	}
	if llc, ok := doc["local_link_connection"].(map[string]any); ok {
		if _, nt := llc["network_type"]; nt && !rq.v.AtLeast(64) {
			return notAcceptable("Request not acceptable.")
		}
		if _, vtep := llc["vtep-logical-switch"]; vtep && (!rq.v.AtLeast(90) || rq.v.AtLeast(105)) {
			return notAcceptable("Request not acceptable.")
		}
	}
	return nil
}

// checkSmartNIC is Ironic's rule that a Smart NIC port names its port_id
// and hostname.
func checkSmartNIC(p *baremetal.Port) error {
	if !p.IsSmartNIC {
		return nil
	}
	_, port := p.LocalLinkConnection["port_id"]
	_, host := p.LocalLinkConnection["hostname"]
	if !port || !host {
		return badRequest("Smart NIC port must have port_id and hostname in local_link_connection")
	}
	return nil
}

// portStoreError maps the store's duplicate errors to Ironic's messages.
func portStoreError(err error, p *baremetal.Port) error {
	var dup *baremetal.DuplicateError
	if errors.As(err, &dup) {
		switch dup.Field {
		case "address":
			return Errorf(http.StatusConflict, "A port with MAC address %s already exists.", p.Address)
		case "uuid":
			return Errorf(http.StatusConflict, "A port with UUID %s already exists.", p.UUID)
		case "name":
			return Errorf(http.StatusConflict, "A port with name %s already exists.", p.Name)
		}
	}
	return err
}

// POST /v1/ports
func (h *Handler) createPort(rq *request) error {
	var doc map[string]any
	if err := rq.decode(&doc); err != nil {
		return err
	}
	for k := range doc {
		if !slices.Contains(portWritable, k) && k != "uuid" {
			return portSchemaError("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	if _, ok := doc["address"]; !ok {
		return portSchemaError("'address' is a required property")
	}
	nodeUUID, hasUUID := doc["node_uuid"]
	nodeIdent, hasIdent := doc["node_ident"]
	switch {
	case hasUUID && hasIdent:
		return portSchemaError("%s is valid under each of {'required': ['node_uuid']}, {'required': ['node_ident']}", portJSON(doc))
	case !hasUUID && !hasIdent:
		return portSchemaError("%s is not valid under any of the given schemas", portJSON(doc))
	case hasIdent && !rq.v.AtLeast(94):
		return notAcceptable("Request not acceptable.")
	}
	ident, ok := nodeUUID.(string)
	if hasIdent {
		ident, ok = nodeIdent.(string)
	}
	if !ok {
		return portSchemaError("%s is not of type 'string'", portJSON(nodeUUID))
	}
	if hasUUID && !looksLikeUUID(ident) {
		return badRequest("Expected UUID for node_uuid: %s", ident)
	}
	node, err := h.store.GetNode(rq.ctx, ident)
	if errors.Is(err, baremetal.ErrNotFound) {
		return badRequest("Node %s could not be found.", ident)
	}
	if err != nil {
		return err
	}
	if err := rq.checkPortBodyVersions(doc); err != nil {
		return err
	}
	p := &baremetal.Port{NodeUUID: node.UUID}
	if err := rq.setPortFields(p, doc); err != nil {
		return err
	}
	g, err := rq.portPortgroup(p)
	if err != nil {
		return err
	}
	if err := rq.checkPortgroupPhysnet(p, g); err != nil {
		return err
	}
	if err := checkSmartNIC(p); err != nil {
		return err
	}
	if pn, ok := doc["physical_network"]; ok && pn == "" {
		return badRequest("A non-empty value is required when setting physical_network")
	}
	if pxe, _ := doc["pxe_enabled"].(bool); g != nil && (pxe || doc["pxe_enabled"] == "true") && !g.StandalonePortsSupported {
		return Errorf(http.StatusConflict, "Port group %s doesn't support standalone ports. This port cannot be created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.", g.UUID)
	}
	// Ironic creates a port under a shared lock of its node: no
	// reservation, the store's transaction checks that the node exists.
	if err := h.store.CreatePort(rq.ctx, p); err != nil {
		if errors.Is(err, baremetal.ErrNotFound) {
			return badRequest("Node %s could not be found.", ident)
		}
		return portStoreError(err, p)
	}
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/ports/"+p.UUID)
	return rq.reply(http.StatusCreated, rq.portView(p))
}

// withNodeLock runs fn holding node uuid's exclusive lock, as Ironic's
// update_port and destroy_port run under task_manager.acquire: the lock
// is the conductor's (its hostname, the default retry policy), so a node
// busy with an operation answers 409 NodeLocked. The lock is released
// whatever fn returns, even when the request's context ended.
func (rq *request) withNodeLock(uuid string, fn func(n *baremetal.Node) error) error {
	n, err := baremetal.AcquireNode(rq.ctx, rq.h.store, uuid, rq.h.c.Hostname(), baremetal.DefaultLockPolicy())
	if err != nil {
		if errors.Is(err, baremetal.ErrNotFound) {
			return notFound("Node %s could not be found.", uuid)
		}
		return err
	}
	defer func() {
		if rerr := rq.h.store.ReleaseNode(context.WithoutCancel(rq.ctx), uuid, rq.h.c.Hostname()); rerr != nil {
			rq.h.log.Error("ironicapi: releasing the node lock after a port write", "node", uuid, "err", rerr)
		}
	}()
	return fn(n)
}

// PATCH /v1/ports/{port}
func (h *Handler) patchPort(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	var touched []string
	for _, p := range ops {
		f := p.rootField()
		if !slices.Contains(portWritable, f) {
			return badRequest("Cannot patch %s. Only the following can be updated: %s", p.Path, strings.Join(portWritable, ", "))
		}
		touched = append(touched, f)
		if p.Path == "/local_link_connection/network_type" {
			touched = append(touched, "local_link_connection/network_type")
		}
	}
	if err := rq.checkPortFieldVersions(touched); err != nil {
		return err
	}
	port, err := rq.port()
	if err != nil {
		return err
	}
	orig, err := h.store.GetNode(rq.ctx, port.NodeUUID)
	if err != nil {
		return err
	}
	target := orig
	// A port moves to another node only if that node exists and has the
	// same owner, and Ironic words both failures alike.
	for _, p := range ops {
		if p.Path != "/node_uuid" || p.Op == "remove" {
			continue
		}
		s, _ := p.Value.(string)
		n, err := h.store.GetNode(rq.ctx, s)
		if err != nil || n.Owner != orig.Owner {
			if err != nil && !errors.Is(err, baremetal.ErrNotFound) {
				return err
			}
			return badRequest("Unable to apply the requested node_uuid '%s'. Requested value was invalid.", s)
		}
		target = n
	}
	before := portDoc(port)
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	after["node_uuid"] = target.UUID
	// Ironic checks the versions of the fields the patch names only (a
	// PATCH of /extra at 1.1 is accepted though the port has fields
	// newer than 1.1), and the keys of a patched local_link_connection.
	if slices.Contains(touched, "local_link_connection") {
		if err := rq.checkPortBodyVersions(map[string]any{"local_link_connection": after["local_link_connection"]}); err != nil {
			return err
		}
	}
	updated := port.Clone()
	updated.NodeUUID = target.UUID
	if err := rq.setPortFields(updated, after); err != nil {
		return err
	}
	g, err := rq.portPortgroup(updated)
	if err != nil {
		return err
	}
	// Unlike a create, a PATCH may leave a Smart NIC port without its
	// hostname for now, as Ironic allows: a client sets is_smartnic and
	// local_link_connection in two requests.
	changed := map[string]bool{}
	for f := range before {
		if !reflect.DeepEqual(normalize(before[f]), normalize(after[f])) {
			changed[f] = true
		}
	}
	if changed["physical_network"] && after["physical_network"] == "" {
		return badRequest("A non-empty value is required when setting physical_network")
	}
	if changed["physical_network"] && g != nil && rq.v.AtLeast(102) {
		return badRequest("physical_network cannot be changed while the port belongs to a portgroup.")
	}
	if changed["portgroup_uuid"] || changed["physical_network"] {
		if err := rq.checkPortgroupPhysnet(updated, g); err != nil {
			return err
		}
	}
	if target.ProvisionState == statemachine.Inspecting && rq.v.AtLeast(39) {
		return Errorf(http.StatusConflict, "Cannot update port \"%s\" on \"%s\" while it is in state \"%s\".", port.UUID, target.UUID, statemachine.Inspecting)
	}
	err = rq.withNodeLock(target.UUID, func(n *baremetal.Node) error {
		if changed["address"] && (n.ProvisionState == statemachine.Active || n.InstanceUUID != "") && !n.Maintenance {
			return Errorf(http.StatusConflict, "Cannot update hardware address for port %s as node %s is active or has instance UUID assigned", port.UUID, n.UUID)
		}
		connectivity := []string{"portgroup_uuid", "pxe_enabled", "local_link_connection", "physical_network"}
		if slices.ContainsFunc(connectivity, func(f string) bool { return changed[f] }) &&
			!slices.Contains(portConnectivityStates, n.ProvisionState) && !n.Maintenance {
			allowed := make([]string, len(portConnectivityStates))
			for i, s := range portConnectivityStates {
				allowed[i] = string(s)
			}
			return Errorf(http.StatusConflict, "Port %s can not have any connectivity attributes (portgroup_id, pxe_enabled, local_link_connection, physical_network) updated unless node %s is in a %s state or in maintenance mode. The current state is %s.",
				port.UUID, n.UUID, strings.Join(allowed, ", "), n.ProvisionState)
		}
		if err := h.store.UpdatePort(rq.ctx, updated); err != nil {
			return portStoreError(err, updated)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, rq.portView(updated))
}

// DELETE /v1/ports/{port}
func (h *Handler) deletePort(rq *request) error {
	ident := rq.r.PathValue("port")
	if !looksLikeUUID(ident) {
		return badRequest("Expected UUID for port_uuid: %s", ident)
	}
	port, err := rq.port()
	if err != nil {
		return err
	}
	return rq.withNodeLock(port.NodeUUID, func(n *baremetal.Node) error {
		if !n.Maintenance {
			for _, k := range portVIFKeys {
				if vif, ok := port.InternalInfo[k].(string); ok && vif != "" {
					return Errorf(http.StatusConflict, "Cannot delete the port %s as it is bound to VIF %s for use.", port.UUID, vif)
				}
			}
		}
		if err := h.store.DeletePort(rq.ctx, port.UUID); err != nil {
			if errors.Is(err, baremetal.ErrNotFound) {
				return notFound("Port %s could not be found.", port.UUID)
			}
			return err
		}
		return rq.status(http.StatusNoContent)
	})
}
