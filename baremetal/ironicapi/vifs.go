package ironicapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
)

// tenantVIFKey is where a port's or port group's attached VIF is kept in
// its internal_info, as Ironic keeps it.
const tenantVIFKey = "tenant_vif_port_id"

// vifNetworkInterfaces are the network interfaces whose VIFs Anvil keeps
// itself, as Ironic's VIFPortIDMixin does: Anvil has no Neutron, so the
// flat interface's VIFs are not bound in Neutron, and the noop
// interface records them rather than forgetting them (see the package
// documentation's differences).
var vifNetworkInterfaces = []string{driver.Noop, driver.Flat}

func (h *Handler) vifRoutes() {
	rt := route{minVersion: 28}
	h.handle("GET /v1/nodes/{node}/vifs", rt, h.listVIFs)
	h.handle("POST /v1/nodes/{node}/vifs", rt, h.attachVIF)
	h.handle("DELETE /v1/nodes/{node}/vifs/{vif}", rt, h.detachVIF)
}

// portLike is a port or a port group a VIF may be attached to.
type portLike struct {
	port  *baremetal.Port
	group *baremetal.Portgroup
}

func (p portLike) internalInfo() map[string]any {
	if p.port != nil {
		return p.port.InternalInfo
	}
	return p.group.InternalInfo
}

func (p portLike) vif() string {
	s, _ := p.internalInfo()[tenantVIFKey].(string)
	return s
}

func (p portLike) uuid() string {
	if p.port != nil {
		return p.port.UUID
	}
	return p.group.UUID
}

func (p portLike) kind() string {
	if p.port != nil {
		return "Port"
	}
	return "Portgroup"
}

// nodePortLikes reads node's ports and port groups.
func (rq *request) nodePortLikes(node string) ([]*baremetal.Port, []*baremetal.Portgroup, error) {
	ports, err := rq.h.store.ListPorts(rq.ctx, node)
	if err != nil {
		return nil, nil, err
	}
	var groups []*baremetal.Portgroup
	page := baremetal.Page{Limit: 1000}
	for {
		batch, err := rq.h.store.Portgroups().List(rq.ctx, baremetal.PortgroupFilter{NodeUUID: node}, page)
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, batch...)
		if len(batch) < page.Limit {
			return ports, groups, nil
		}
		page.Marker = batch[len(batch)-1].UUID
	}
}

// GET /v1/nodes/{node}/vifs (1.28): {"vifs": [{"id": ...}]}, the ports'
// VIFs then the port groups'.
func (h *Handler) listVIFs(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	ports, groups, err := rq.nodePortLikes(n.UUID)
	if err != nil {
		return err
	}
	vifs := []map[string]any{}
	for _, p := range ports {
		if v := (portLike{port: p}).vif(); v != "" {
			vifs = append(vifs, map[string]any{"id": v})
		}
	}
	for _, g := range groups {
		if v := (portLike{group: g}).vif(); v != "" {
			vifs = append(vifs, map[string]any{"id": v})
		}
	}
	return rq.reply(http.StatusOK, map[string]any{"vifs": vifs})
}

// POST /v1/nodes/{node}/vifs {"id": vif, "port_uuid" or
// "portgroup_uuid": optional}: 204. Under the node's lock, the VIF goes
// to a free port or port group by Ironic's rule
// (get_free_port_like_object): a port of a port group only through its
// group (unless the group is unusable), a port group only if it has
// ports; preferring port groups, then ports with PXE enabled. There is
// no Neutron to give the VIF physical networks, so physical networks do
// not order the choice. A VIF attached already is a 409, no free port a
// 400, as in Ironic.
func (h *Handler) attachVIF(rq *request) error {
	var body map[string]any
	if err := rq.decode(&body); err != nil {
		return err
	}
	id, _ := body["id"].(string)
	if strings.TrimSpace(id) == "" {
		return badRequest("Invalid input for field/attribute id. Value: %s. Mandatory field missing.", portJSON(body["id"]))
	}
	if len(id) > 255 {
		return badRequest("Invalid input for field/attribute id: at most 255 characters")
	}
	wantPort, _ := body["port_uuid"].(string)
	wantGroup, _ := body["portgroup_uuid"].(string)
	for k := range body {
		if k != "id" && k != "port_uuid" && k != "portgroup_uuid" {
			return badRequest("Unknown attribute for VIF: %s", k)
		}
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	if !slices.Contains(vifNetworkInterfaces, n.NetworkInterface) {
		return badRequest("Node %s has network interface %s; VIFs can be attached with the noop and flat network interfaces only (Anvil has no Neutron)", n.UUID, n.NetworkInterface)
	}
	return rq.withNodeLock(n.UUID, func(*baremetal.Node) error {
		ports, groups, err := rq.nodePortLikes(n.UUID)
		if err != nil {
			return err
		}
		for _, pl := range append(portLikes(ports, nil), portLikes(nil, groups)...) {
			if pl.vif() == id {
				return Errorf(http.StatusConflict, "Unable to attach VIF because VIF %s is already attached to Ironic %s %s", id, pl.kind(), pl.uuid())
			}
		}
		free := freePortLikes(ports, groups, id, wantPort, wantGroup)
		if len(free) == 0 {
			return badRequest("Unable to attach VIF %s, not enough free physical ports.", id)
		}
		best := free[0]
		for _, pl := range free[1:] {
			if betterPortLike(pl, best) {
				best = pl
			}
		}
		if best.port != nil {
			p := best.port.Clone()
			p.InternalInfo = withKey(p.InternalInfo, tenantVIFKey, id)
			err = rq.h.store.UpdatePort(rq.ctx, p)
		} else {
			g := best.group.Clone()
			g.InternalInfo = withKey(g.InternalInfo, tenantVIFKey, id)
			err = rq.h.store.Portgroups().Update(rq.ctx, g)
		}
		if err != nil {
			return err
		}
		return rq.status(http.StatusNoContent)
	})
}

// DELETE /v1/nodes/{node}/vifs/{vif}: 204; a VIF the node does not have
// is a 400 (Ironic's VifNotAttached).
func (h *Handler) detachVIF(rq *request) error {
	id := rq.r.PathValue("vif")
	n, err := rq.node()
	if err != nil {
		return err
	}
	return rq.withNodeLock(n.UUID, func(*baremetal.Node) error {
		ports, groups, err := rq.nodePortLikes(n.UUID)
		if err != nil {
			return err
		}
		for _, pl := range append(portLikes(nil, groups), portLikes(ports, nil)...) {
			if pl.vif() != id {
				continue
			}
			if pl.port != nil {
				p := pl.port.Clone()
				p.InternalInfo = withoutKey(p.InternalInfo, tenantVIFKey)
				p.Extra = withoutKey(p.Extra, "vif_port_id")
				err = rq.h.store.UpdatePort(rq.ctx, p)
			} else {
				g := pl.group.Clone()
				g.InternalInfo = withoutKey(g.InternalInfo, tenantVIFKey)
				g.Extra = withoutKey(g.Extra, "vif_port_id")
				err = rq.h.store.Portgroups().Update(rq.ctx, g)
			}
			if err != nil {
				return err
			}
			return rq.status(http.StatusNoContent)
		}
		return badRequest("Unable to detach VIF %s from node %s because it is not attached to it.", id, n.UUID)
	})
}

func portLikes(ports []*baremetal.Port, groups []*baremetal.Portgroup) []portLike {
	out := make([]portLike, 0, len(ports)+len(groups))
	for _, p := range ports {
		out = append(out, portLike{port: p})
	}
	for _, g := range groups {
		out = append(out, portLike{group: g})
	}
	return out
}

// freePortLikes is Ironic's _get_free_portgroups_and_ports without
// physical networks: the ports outside port groups with no VIF, the port
// groups with no VIF that have ports, and the free ports of a port group
// one of whose ports carries vif already. wantPort or wantGroup narrow
// the choice to one object.
func freePortLikes(ports []*baremetal.Port, groups []*baremetal.Portgroup, vif, wantPort, wantGroup string) []portLike {
	var free []portLike
	byGroup := map[string][]*baremetal.Port{}
	unusable := map[string]bool{}
	for _, p := range ports {
		if wantPort != "" && wantPort != p.UUID {
			continue
		}
		pl := portLike{port: p}
		if pl.vif() != "" {
			if p.PortgroupUUID != "" {
				unusable[p.PortgroupUUID] = true
			}
			continue
		}
		if p.PortgroupUUID == "" && wantGroup == "" {
			free = append(free, pl)
		} else if p.PortgroupUUID != "" {
			byGroup[p.PortgroupUUID] = append(byGroup[p.PortgroupUUID], p)
		}
	}
	if wantPort != "" {
		return free
	}
	for _, g := range groups {
		pl := portLike{group: g}
		if (wantGroup != "" && wantGroup != g.UUID) || pl.vif() != "" {
			continue
		}
		if unusable[g.UUID] {
			if wantGroup == "" {
				for _, p := range byGroup[g.UUID] {
					free = append(free, portLike{port: p})
				}
			}
		} else if len(byGroup[g.UUID]) > 0 {
			free = append(free, pl)
		}
	}
	return free
}

// betterPortLike orders free objects as Ironic's sort_key without
// physical networks: port groups first, then ports with PXE enabled; the
// first in list order wins a tie.
func betterPortLike(a, b portLike) bool {
	rank := func(p portLike) int {
		switch {
		case p.group != nil:
			return 2
		case p.port.PXEEnabled:
			return 1
		}
		return 0
	}
	return rank(a) > rank(b)
}

func withKey(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

func withoutKey(m map[string]any, k string) map[string]any {
	if _, ok := m[k]; !ok {
		return m
	}
	out := make(map[string]any, len(m))
	for key, val := range m {
		if key != k {
			out[key] = val
		}
	}
	return out
}
