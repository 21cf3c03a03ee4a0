package ironicapi

import (
	"errors"
	"net/http"

	"github.com/anvilmetal/anvil/baremetal"
)

// allocationMinVersion is the microversion allocations appear in (1.52):
// PATCH came with 1.57, backfilling (node in a create) with 1.58, owner
// with 1.60.
const allocationMinVersion = 52

var allocationFieldVersions = map[string]int{
	"uuid": 52, "name": 52, "node_uuid": 52, "state": 52, "last_error": 52, "resource_class": 52,
	"traits": 52, "candidate_nodes": 52, "extra": 52, "created_at": 52, "updated_at": 52, "links": 52,
	"owner": 60,
}

var allocationCreateFields = map[string]int{
	"uuid": 52, "name": 52, "resource_class": 52, "traits": 52, "candidate_nodes": 52, "extra": 52,
	"node": 58, "owner": 60,
}

// allocationWritable are the fields PATCH may change (Ironic: name and
// extra).
var allocationWritable = map[string]bool{"name": true, "extra": true}

func (h *Handler) allocationRoutes() {
	rt := route{minVersion: allocationMinVersion}
	h.handle("GET /v1/allocations", rt, h.listAllocations)
	h.handle("GET /v1/allocations/{allocation}", rt, h.getAllocation)
	h.handle("POST /v1/allocations", rt, h.createAllocation)
	h.handle("PATCH /v1/allocations/{allocation}", route{minVersion: 57}, h.patchAllocation)
	h.handle("DELETE /v1/allocations/{allocation}", rt, h.deleteAllocation)
	h.handle("GET /v1/nodes/{node}/allocation", rt, h.getNodeAllocation)
	h.handle("DELETE /v1/nodes/{node}/allocation", rt, h.deleteNodeAllocation)
}

// allocationView is a as Ironic shows it at the request's version.
func (rq *request) allocationView(a *baremetal.Allocation) map[string]any {
	traits, cands := a.Traits, a.CandidateNodes
	if traits == nil {
		traits = []string{}
	}
	if cands == nil {
		cands = []string{}
	}
	view := map[string]any{
		"uuid":            a.UUID,
		"name":            nullable(a.Name),
		"node_uuid":       nullable(a.NodeUUID),
		"state":           string(a.State),
		"last_error":      nullable(a.LastError),
		"resource_class":  nullable(a.ResourceClass),
		"traits":          traits,
		"candidate_nodes": cands,
		"extra":           object(a.Extra),
		"owner":           nullable(a.Owner),
		"created_at":      timestamp(a.CreatedAt),
		"updated_at":      timestamp(a.UpdatedAt),
		"links":           rq.links("allocations", a.UUID),
	}
	rq.hideNewer(view, allocationFieldVersions)
	return view
}

// allocation finds the allocation the path names, by UUID or name.
func (rq *request) allocation() (*baremetal.Allocation, error) {
	ident := rq.r.PathValue("allocation")
	a, err := rq.h.store.Allocations().Get(rq.ctx, ident)
	if err != nil {
		return nil, notFoundAs(err, "Allocation %s could not be found.", ident)
	}
	return a, nil
}

// GET /v1/allocations
func (h *Handler) listAllocations(rq *request) error {
	fields, err := rq.parseFields(allocationFieldVersions)
	if err != nil {
		return err
	}
	page, err := rq.page()
	if err != nil {
		return err
	}
	q := rq.r.URL.Query()
	f := baremetal.AllocationFilter{ResourceClass: q.Get("resource_class"), Owner: q.Get("owner")}
	if f.Owner != "" && !rq.v.AtLeast(60) {
		return notAcceptable("Request not acceptable.")
	}
	if s := q.Get("state"); s != "" {
		switch st := baremetal.AllocationState(s); st {
		case baremetal.AllocationAllocating, baremetal.AllocationActive, baremetal.AllocationError:
			f.State = st
		default:
			return badRequest("Invalid state %s; expected one of allocating, active, error.", s)
		}
	}
	if ident := q.Get("node"); ident != "" {
		n, err := h.store.GetNode(rq.ctx, ident)
		if err != nil {
			return notFoundAs(err, "Node %s could not be found.", ident)
		}
		f.NodeUUID = n.UUID
	}
	list, err := h.store.Allocations().List(rq.ctx, f, page)
	if err != nil {
		return err
	}
	return listReply(rq, "allocations", "allocations", list, page, fields, rq.allocationView,
		func(a *baremetal.Allocation) string { return a.UUID })
}

// GET /v1/allocations/{allocation}
func (h *Handler) getAllocation(rq *request) error {
	fields, err := rq.parseFields(allocationFieldVersions)
	if err != nil {
		return err
	}
	a, err := rq.allocation()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.allocationView(a), fields))
}

// POST /v1/allocations: the conductor processes the allocation before
// the answer, so it is active or in error already (Ironic answers while
// it is still allocating; clients poll until it is not).
func (h *Handler) createAllocation(rq *request) error {
	body, err := rq.decodeResource(allocationCreateFields)
	if err != nil {
		return err
	}
	a := &baremetal.Allocation{}
	if a.UUID, err = str(body, "uuid"); err != nil {
		return err
	}
	if a.Name, err = str(body, "name"); err != nil {
		return err
	}
	if a.ResourceClass, err = str(body, "resource_class"); err != nil {
		return err
	}
	if a.Owner, err = str(body, "owner"); err != nil {
		return err
	}
	if a.NodeUUID, err = str(body, "node"); err != nil {
		return err
	}
	if a.Traits, err = stringList(body, "traits"); err != nil {
		return err
	}
	if a.CandidateNodes, err = stringList(body, "candidate_nodes"); err != nil {
		return err
	}
	if a.Extra, err = dict(body, "extra"); err != nil {
		return err
	}
	if a.ResourceClass == "" && a.NodeUUID == "" {
		return badRequest("The resource_class field is mandatory when not backfilling")
	}
	if a.NodeUUID != "" {
		if _, err := h.store.GetNode(rq.ctx, a.NodeUUID); err != nil {
			return notFoundAs(err, "Node %s could not be found.", a.NodeUUID)
		}
	}
	created, err := h.c.StartAllocation(rq.ctx, a)
	if err != nil {
		return allocationWriteError(err)
	}
	return rq.created("allocations", created.UUID, rq.allocationView(created))
}

func allocationWriteError(err error) error {
	var de *baremetal.DuplicateError
	if errors.As(err, &de) {
		switch de.Field {
		case "name":
			return Errorf(http.StatusConflict, "An allocation with name %s already exists.", de.Value)
		case "uuid":
			return Errorf(http.StatusConflict, "An allocation with UUID %s already exists.", de.Value)
		}
	}
	return resourceError(err)
}

// PATCH /v1/allocations/{allocation} (1.57): name and extra.
func (h *Handler) patchAllocation(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	a, err := rq.allocation()
	if err != nil {
		return err
	}
	before := map[string]any{"uuid": a.UUID, "name": nullable(a.Name), "extra": object(a.Extra),
		"node_uuid": nullable(a.NodeUUID), "state": string(a.State), "last_error": nullable(a.LastError),
		"resource_class": nullable(a.ResourceClass), "traits": a.Traits, "candidate_nodes": a.CandidateNodes,
		"owner": nullable(a.Owner), "created_at": nil, "updated_at": nil}
	for _, p := range ops {
		if f := p.rootField(); !allocationWritable[f] {
			if _, known := before[f]; known {
				return badRequest("'/%s' is an internal attribute and can not be updated", f)
			}
		}
	}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	if a.Name, err = str(after, "name"); err != nil {
		return err
	}
	if a.Extra, err = dict(after, "extra"); err != nil {
		return err
	}
	if err := h.store.Allocations().Update(rq.ctx, a); err != nil {
		return allocationWriteError(err)
	}
	return rq.reply(http.StatusOK, rq.allocationView(a))
}

// DELETE /v1/allocations/{allocation}
func (h *Handler) deleteAllocation(rq *request) error {
	a, err := rq.allocation()
	if err != nil {
		return err
	}
	if err := h.c.DeleteAllocation(rq.ctx, a.UUID); err != nil {
		return resourceError(notFoundAs(err, "Allocation %s could not be found.", a.UUID))
	}
	return rq.status(http.StatusNoContent)
}

// nodeAllocation is the allocation of the node the path names.
func (rq *request) nodeAllocation() (*baremetal.Allocation, error) {
	n, err := rq.node()
	if err != nil {
		return nil, err
	}
	if n.AllocationUUID == "" {
		return nil, notFound("Node %s is not allocated.", n.UUID)
	}
	a, err := rq.h.store.Allocations().Get(rq.ctx, n.AllocationUUID)
	if err != nil {
		return nil, notFoundAs(err, "Allocation %s could not be found.", n.AllocationUUID)
	}
	return a, nil
}

// GET /v1/nodes/{node}/allocation
func (h *Handler) getNodeAllocation(rq *request) error {
	fields, err := rq.parseFields(allocationFieldVersions)
	if err != nil {
		return err
	}
	a, err := rq.nodeAllocation()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.allocationView(a), fields))
}

// DELETE /v1/nodes/{node}/allocation
func (h *Handler) deleteNodeAllocation(rq *request) error {
	a, err := rq.nodeAllocation()
	if err != nil {
		return err
	}
	if err := h.c.DeleteAllocation(rq.ctx, a.UUID); err != nil {
		return resourceError(notFoundAs(err, "Allocation %s could not be found.", a.UUID))
	}
	return rq.status(http.StatusNoContent)
}
