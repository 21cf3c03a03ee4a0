package ironicapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/anvilmetal/anvil/baremetal"
)

// runbookMinVersion is the microversion runbooks appear in (1.92).
const runbookMinVersion = 92

var runbookFieldVersions = map[string]int{
	"uuid": 92, "name": 92, "steps": 92, "disable_ramdisk": 92, "public": 92, "owner": 92,
	"extra": 92, "created_at": 92, "updated_at": 92, "links": 92,
}

// runbookListFields are a listing's fields without detail.
var runbookListFields = []string{"uuid", "name", "links"}

var runbookCreateFields = map[string]int{
	"uuid": 92, "name": 92, "steps": 92, "disable_ramdisk": 92, "public": 92, "owner": 92, "extra": 92,
}

var runbookWritable = map[string]bool{
	"name": true, "steps": true, "disable_ramdisk": true, "public": true, "owner": true, "extra": true,
}

func (h *Handler) runbookRoutes() {
	rt := route{minVersion: runbookMinVersion}
	h.handle("GET /v1/runbooks", rt, h.listRunbooks)
	h.handle("GET /v1/runbooks/{runbook}", rt, h.getRunbook)
	h.handle("POST /v1/runbooks", rt, h.createRunbook)
	h.handle("PATCH /v1/runbooks/{runbook}", rt, h.patchRunbook)
	h.handle("DELETE /v1/runbooks/{runbook}", rt, h.deleteRunbook)
}

func runbookSteps(r *baremetal.Runbook, masked bool) []any {
	list := make([]any, 0, len(r.Steps))
	for _, s := range r.Steps {
		args := s.Args
		if masked {
			args = baremetal.MaskSecrets(args)
		}
		list = append(list, map[string]any{"interface": s.Interface, "step": s.Step, "args": object(args), "order": s.Order})
	}
	return list
}

// runbookView is r as Ironic shows it; step arguments are masked.
func (rq *request) runbookView(r *baremetal.Runbook) map[string]any {
	return map[string]any{
		"uuid": r.UUID, "name": r.Name, "steps": runbookSteps(r, true), "disable_ramdisk": r.DisableRamdisk,
		"public": r.Public, "owner": nullable(r.Owner), "extra": object(r.Extra),
		"created_at": timestamp(r.CreatedAt), "updated_at": timestamp(r.UpdatedAt),
		"links": rq.links("runbooks", r.UUID),
	}
}

func (rq *request) runbook() (*baremetal.Runbook, error) {
	ident := rq.r.PathValue("runbook")
	r, err := rq.h.store.GetRunbook(rq.ctx, ident)
	if err != nil {
		return nil, notFoundAs(err, "Runbook %s could not be found.", ident)
	}
	return r, nil
}

// GET /v1/runbooks
func (h *Handler) listRunbooks(rq *request) error {
	fields, err := rq.parseFields(runbookFieldVersions)
	if err != nil {
		return err
	}
	detail, err := rq.detailFlag(runbookMinVersion, fields)
	if err != nil {
		return err
	}
	page, err := rq.page()
	if err != nil {
		return err
	}
	list, err := h.store.ListRunbooks(rq.ctx, baremetal.RunbookFilter{Owner: rq.r.URL.Query().Get("owner")}, page)
	if err != nil {
		return err
	}
	if fields == nil && !detail {
		fields = runbookListFields
	}
	out := make([]map[string]any, 0, len(list))
	last := ""
	for _, r := range list {
		out = append(out, filterView(rq.runbookView(r), fields))
		last = r.UUID
	}
	return rq.reply(http.StatusOK, rq.listBody("runbooks", "runbooks", out, page, last))
}

// GET /v1/runbooks/{runbook}
func (h *Handler) getRunbook(rq *request) error {
	fields, err := rq.parseFields(runbookFieldVersions)
	if err != nil {
		return err
	}
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.runbookView(r), fields))
}

// integer reads a JSON integer value (json.Number or float64).
func integer(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case json.Number:
		i, err := strconv.Atoi(n.String())
		return i, err == nil
	case float64:
		return int(n), n == float64(int(n))
	}
	return 0, false
}

// parseRunbookSteps reads a runbook's steps as Ironic's schema does:
// objects with interface, step, args and order, all required.
func parseRunbookSteps(v any) ([]baremetal.RunbookStep, error) {
	raw, ok := v.([]any)
	if !ok {
		return nil, badRequest("Invalid input for field/attribute steps. Value: %s. Expected a list of steps", jsonText(v))
	}
	out := make([]baremetal.RunbookStep, 0, len(raw))
	for i, x := range raw {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, badRequest("Runbook step %d: expected an object with interface, step, args and order", i)
		}
		for k := range m {
			switch k {
			case "interface", "step", "args", "order":
			default:
				return nil, badRequest("Runbook step %d: unexpected key %s; allowed keys are interface, step, args, order", i, k)
			}
		}
		var s baremetal.RunbookStep
		var err error
		if s.Interface, err = str(m, "interface"); err != nil {
			return nil, err
		}
		if s.Step, err = str(m, "step"); err != nil {
			return nil, err
		}
		args, ok := m["args"].(map[string]any)
		if !ok {
			return nil, badRequest("Runbook step %d: args is required and must be an object", i)
		}
		s.Args = args
		order, ok := integer(m["order"])
		if !ok || order < 0 {
			return nil, badRequest("Runbook step %d: order is required and must be a non-negative integer", i)
		}
		s.Order = order
		out = append(out, s)
	}
	return out, nil
}

// setRunbook copies the members of doc into r.
func setRunbook(doc map[string]any, r *baremetal.Runbook) error {
	var err error
	if r.Name, err = str(doc, "name"); err != nil {
		return err
	}
	if r.Owner, err = str(doc, "owner"); err != nil {
		return err
	}
	if r.Extra, err = dict(doc, "extra"); err != nil {
		return err
	}
	if r.DisableRamdisk, err = boolean(doc, "disable_ramdisk", false); err != nil {
		return err
	}
	if r.Public, err = boolean(doc, "public", false); err != nil {
		return err
	}
	if r.Public && r.Owner != "" {
		return badRequest("Cannot create a public runbook with an owner.")
	}
	s, ok := doc["steps"]
	if !ok {
		return badRequest("Mandatory field missing: steps")
	}
	if r.Steps, err = parseRunbookSteps(s); err != nil {
		return err
	}
	return nil
}

func runbookWriteError(err error) error {
	var de *baremetal.DuplicateError
	if errors.As(err, &de) {
		switch de.Field {
		case "name":
			return Errorf(http.StatusConflict, "A runbook with name %s already exists.", de.Value)
		case "uuid":
			return Errorf(http.StatusConflict, "Runbook with UUID %s already exists.", de.Value)
		}
	}
	var ife *baremetal.InvalidFieldError
	if errors.As(err, &ife) {
		return badRequest("Invalid runbook %s: expected %s", ife.Field, ife.Expected)
	}
	return err
}

// POST /v1/runbooks
func (h *Handler) createRunbook(rq *request) error {
	body, err := rq.decodeResource(runbookCreateFields)
	if err != nil {
		return err
	}
	if _, ok := body["name"]; !ok {
		return badRequest("Mandatory field missing: name")
	}
	r := &baremetal.Runbook{}
	if r.UUID, err = str(body, "uuid"); err != nil {
		return err
	}
	if err := setRunbook(body, r); err != nil {
		return err
	}
	if err := h.store.CreateRunbook(rq.ctx, r); err != nil {
		return runbookWriteError(err)
	}
	return rq.created("runbooks", r.UUID, rq.runbookView(r))
}

// PATCH /v1/runbooks/{runbook}
func (h *Handler) patchRunbook(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	before := map[string]any{"uuid": r.UUID, "name": r.Name, "steps": runbookSteps(r, false),
		"disable_ramdisk": r.DisableRamdisk, "public": r.Public, "owner": nullable(r.Owner),
		"extra": object(r.Extra), "created_at": nil, "updated_at": nil}
	for _, p := range ops {
		if f := p.rootField(); !runbookWritable[f] {
			if _, known := before[f]; known {
				return badRequest("'/%s' is an internal attribute and can not be updated", f)
			}
		}
	}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	if err := setRunbook(after, r); err != nil {
		return err
	}
	if err := h.store.UpdateRunbook(rq.ctx, r); err != nil {
		return runbookWriteError(err)
	}
	return rq.reply(http.StatusOK, rq.runbookView(r))
}

// DELETE /v1/runbooks/{runbook}
func (h *Handler) deleteRunbook(rq *request) error {
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	if err := h.store.DeleteRunbook(rq.ctx, r.UUID); err != nil {
		return notFoundAs(err, "Runbook %s could not be found.", r.UUID)
	}
	return rq.status(http.StatusNoContent)
}
