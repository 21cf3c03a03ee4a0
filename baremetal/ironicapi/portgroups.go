package ironicapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
)

// portgroupMinVersion is the microversion portgroups appear in (1.23);
// mode and properties came with 1.26.
const portgroupMinVersion = 23

// defaultPortgroupMode is Ironic's [DEFAULT]default_portgroup_mode.
const defaultPortgroupMode = "active-backup"

// portgroupFieldVersions are the portgroup fields with the microversion
// that introduced each.
var portgroupFieldVersions = map[string]int{
	"uuid": 23, "name": 23, "address": 23, "node_uuid": 23, "extra": 23, "internal_info": 23,
	"standalone_ports_supported": 23, "created_at": 23, "updated_at": 23, "links": 23, "ports": 23,
	"mode": 26, "properties": 26, "dynamic_portgroup": 111,
}

// portgroupListFields are a listing's fields without detail (Ironic's
// _DEFAULT_RETURN_FIELDS).
var portgroupListFields = []string{"uuid", "address", "name", "links"}

// portgroupCreateFields are the members a create body may have.
var portgroupCreateFields = map[string]int{
	"uuid": 23, "name": 23, "address": 23, "node_uuid": 23, "extra": 23,
	"standalone_ports_supported": 23, "mode": 26, "properties": 26,
}

// portgroupWritable are the fields PATCH may change.
var portgroupWritable = map[string]bool{
	"name": true, "address": true, "node_uuid": true, "extra": true,
	"standalone_ports_supported": true, "mode": true, "properties": true,
}

func (h *Handler) portgroupRoutes() {
	rt := route{minVersion: portgroupMinVersion}
	h.handle("GET /v1/portgroups", rt, h.listPortgroups(false, false))
	h.handle("GET /v1/portgroups/detail", rt, h.listPortgroups(true, false))
	h.handle("GET /v1/portgroups/{portgroup}", rt, h.getPortgroup)
	h.handle("POST /v1/portgroups", rt, h.createPortgroup)
	h.handle("PATCH /v1/portgroups/{portgroup}", rt, h.patchPortgroup)
	h.handle("DELETE /v1/portgroups/{portgroup}", rt, h.deletePortgroup)
	h.handle("GET /v1/nodes/{node}/portgroups", rt, h.listPortgroups(false, true))
	h.handle("GET /v1/nodes/{node}/portgroups/detail", rt, h.listPortgroups(true, true))
}

// portgroupView is g as Ironic shows it at the request's version.
func (rq *request) portgroupView(g *baremetal.Portgroup) map[string]any {
	view := map[string]any{
		"uuid":                       g.UUID,
		"name":                       nullable(g.Name),
		"address":                    nullable(g.Address),
		"node_uuid":                  g.NodeUUID,
		"mode":                       nullable(g.Mode),
		"properties":                 object(g.Properties),
		"standalone_ports_supported": g.StandalonePortsSupported,
		"internal_info":              object(baremetal.MaskSecrets(g.InternalInfo)),
		"extra":                      object(g.Extra),
		"created_at":                 timestamp(g.CreatedAt),
		"updated_at":                 timestamp(g.UpdatedAt),
		"links":                      rq.links("portgroups", g.UUID),
		"ports":                      rq.links("portgroups", g.UUID+"/ports"),
		// Read-only (1.111): set by Ironic for the port groups a network
		// interface forms by itself, which Anvil never forms.
		"dynamic_portgroup": false,
	}
	rq.hideNewer(view, portgroupFieldVersions)
	return view
}

// portgroup finds the portgroup the path names, by UUID or name.
func (rq *request) portgroup() (*baremetal.Portgroup, error) {
	ident := rq.r.PathValue("portgroup")
	g, err := rq.h.store.Portgroups().Get(rq.ctx, ident)
	if err != nil {
		return nil, notFoundAs(err, "Portgroup %s could not be found.", ident)
	}
	return g, nil
}

// GET /v1/portgroups[/detail], /v1/nodes/{node}/portgroups[/detail]
func (h *Handler) listPortgroups(detailPath, underNode bool) handlerFunc {
	return func(rq *request) error {
		fields, err := rq.parseFields(portgroupFieldVersions)
		if err != nil {
			return err
		}
		if detailPath && fields != nil {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		detail, err := rq.detailFlag(43, fields)
		if err != nil {
			return err
		}
		detail = detail || detailPath
		page, err := rq.page()
		if err != nil {
			return err
		}
		q := rq.r.URL.Query()
		var f baremetal.PortgroupFilter
		nodeIdent := q.Get("node")
		if underNode {
			nodeIdent = rq.r.PathValue("node")
		}
		if nodeIdent != "" {
			n, err := h.store.GetNode(rq.ctx, nodeIdent)
			if err != nil {
				return notFoundAs(err, "Node %s could not be found.", nodeIdent)
			}
			f.NodeUUID = n.UUID
		}
		if a := q.Get("address"); a != "" {
			if _, err := baremetal.NormalizeMAC("address", a); err != nil {
				return badRequest("Invalid MAC address: %s", a)
			}
			f.Address = a
		}
		groups, err := h.store.Portgroups().List(rq.ctx, f, page)
		if err != nil {
			return err
		}
		if fields == nil && !detail {
			fields = portgroupListFields
		}
		res := "portgroups"
		if underNode {
			res = "nodes/" + nodeIdent + "/portgroups"
		}
		if detailPath {
			res += "/detail"
		}
		return listReply(rq, "portgroups", res, groups, page, fields, rq.portgroupView,
			func(g *baremetal.Portgroup) string { return g.UUID })
	}
}

// GET /v1/portgroups/{portgroup}
func (h *Handler) getPortgroup(rq *request) error {
	fields, err := rq.parseFields(portgroupFieldVersions)
	if err != nil {
		return err
	}
	g, err := rq.portgroup()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.portgroupView(g), fields))
}

// setPortgroupField writes a member of a create body or patched document.
func setPortgroupField(g *baremetal.Portgroup, doc map[string]any, f string) error {
	var err error
	switch f {
	case "uuid":
		g.UUID, err = str(doc, f)
	case "name":
		g.Name, err = str(doc, f)
	case "address":
		g.Address, err = str(doc, f)
	case "node_uuid":
		g.NodeUUID, err = str(doc, f)
	case "mode":
		g.Mode, err = str(doc, f)
	case "properties":
		g.Properties, err = dict(doc, f)
	case "extra":
		g.Extra, err = dict(doc, f)
	case "standalone_ports_supported":
		g.StandalonePortsSupported, err = boolean(doc, f, true)
	}
	return err
}

// portgroupWriteError maps a store error of a portgroup write to Ironic's
// messages.
func portgroupWriteError(err error, g *baremetal.Portgroup) error {
	var nf *baremetal.NotFoundError
	if errors.As(err, &nf) && nf.Kind == "node" {
		return badRequest("Node %s could not be found.", nf.Ident)
	}
	var de *baremetal.DuplicateError
	if errors.As(err, &de) {
		switch de.Field {
		case "address":
			return Errorf(http.StatusConflict, "A port or portgroup with MAC address %s already exists.", de.Value)
		case "name":
			return Errorf(http.StatusConflict, "A portgroup with name %s already exists.", de.Value)
		case "uuid":
			return Errorf(http.StatusConflict, "A portgroup with UUID %s already exists.", de.Value)
		}
	}
	return resourceError(err)
}

// POST /v1/portgroups
func (h *Handler) createPortgroup(rq *request) error {
	body, err := rq.decodeResource(portgroupCreateFields)
	if err != nil {
		return err
	}
	g := &baremetal.Portgroup{StandalonePortsSupported: true}
	for f := range body {
		if err := setPortgroupField(g, body, f); err != nil {
			return err
		}
	}
	if g.NodeUUID == "" {
		return badRequest("Mandatory field missing: node_uuid")
	}
	n, err := h.store.GetNode(rq.ctx, g.NodeUUID)
	if err != nil {
		return portgroupWriteError(err, g)
	}
	g.NodeUUID = n.UUID
	if g.Mode == "" {
		g.Mode = defaultPortgroupMode
	}
	if err := h.store.Portgroups().Create(rq.ctx, g); err != nil {
		return portgroupWriteError(err, g)
	}
	return rq.created("portgroups", g.UUID, rq.portgroupView(g))
}

// rawPortgroupView is the document a portgroup PATCH applies to.
func rawPortgroupView(g *baremetal.Portgroup) map[string]any {
	return map[string]any{
		"uuid": g.UUID, "name": nullable(g.Name), "address": nullable(g.Address), "node_uuid": g.NodeUUID,
		"mode": nullable(g.Mode), "properties": object(g.Properties), "extra": object(g.Extra),
		"standalone_ports_supported": g.StandalonePortsSupported, "internal_info": object(g.InternalInfo),
		"created_at": nil, "updated_at": nil, "dynamic_portgroup": false,
	}
}

// PATCH /v1/portgroups/{portgroup}
func (h *Handler) patchPortgroup(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	g, err := rq.portgroup()
	if err != nil {
		return err
	}
	before := rawPortgroupView(g)
	for _, p := range ops {
		f := p.rootField()
		if !portgroupWritable[f] {
			if _, known := before[f]; known {
				return badRequest("'/%s' is an internal attribute and can not be updated", f)
			}
		}
		if minor, ok := portgroupFieldVersions[f]; ok && !rq.v.AtLeast(minor) && f != "mode" && f != "properties" {
			return notAcceptable("Request not acceptable.")
		}
	}
	// mode and properties (1.26): Ironic's is_path_updated looks at the
	// patch's first operation only, so before 1.26 a patch is refused
	// when its first operation names one of them, and a later operation
	// on them is applied. Kept as Ironic does it (see the package
	// documentation).
	if len(ops) > 0 && !rq.v.AtLeast(26) {
		if f := ops[0].rootField(); f == "mode" || f == "properties" {
			return notAcceptable("Request not acceptable.")
		}
	}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	for f := range portgroupWritable {
		if normalize(before[f]) == normalize(after[f]) {
			continue
		}
		if err := setPortgroupField(g, after, f); err != nil {
			return err
		}
	}
	if strings.TrimSpace(g.NodeUUID) == "" {
		return badRequest("Mandatory field missing: node_uuid")
	}
	n, err := h.store.GetNode(rq.ctx, g.NodeUUID)
	if err != nil {
		return portgroupWriteError(err, g)
	}
	g.NodeUUID = n.UUID
	if err := h.store.Portgroups().Update(rq.ctx, g); err != nil {
		return portgroupWriteError(err, g)
	}
	return rq.reply(http.StatusOK, rq.portgroupView(g))
}

// DELETE /v1/portgroups/{portgroup}
func (h *Handler) deletePortgroup(rq *request) error {
	g, err := rq.portgroup()
	if err != nil {
		return err
	}
	if err := h.store.Portgroups().Delete(rq.ctx, g.UUID); err != nil {
		return resourceError(notFoundAs(err, "Portgroup %s could not be found.", g.UUID))
	}
	return rq.status(http.StatusNoContent)
}
