package ironicapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
)

// runbookMinVersion is the microversion runbooks appear in (1.92);
// runbookTraitsVersion the one that gives them traits and a description,
// lets their names be any logical name and adds /v1/runbooks/{r}/traits
// (1.112).
const (
	runbookMinVersion    = 92
	runbookTraitsVersion = 112
)

var runbookFieldVersions = map[string]int{
	"uuid": 92, "name": 92, "steps": 92, "disable_ramdisk": 92, "public": 92, "owner": 92,
	"extra": 92, "created_at": 92, "updated_at": 92, "links": 92,
	"description": runbookTraitsVersion, "traits": runbookTraitsVersion,
}

// runbookListFields are a listing's fields without detail.
var runbookListFields = []string{"uuid", "name", "links"}

// runbookCreateFields are the members a create body may have. Traits
// are set through /v1/runbooks/{r}/traits only, as in Ironic. A
// description before 1.112 is refused by createRunbook as an unknown
// attribute (400), as Ironic's schema of those versions refuses it.
var runbookCreateFields = map[string]int{
	"uuid": 92, "name": 92, "steps": 92, "disable_ramdisk": 92, "public": 92, "owner": 92, "extra": 92,
	"description": 92,
}

// runbookPatchable are the fields a PATCH may change at v, in Ironic's
// order (its _get_patch_allowed_fields).
func runbookPatchable(v Version) []string {
	out := []string{"disable_ramdisk", "extra", "name", "owner", "public", "steps"}
	if v.AtLeast(runbookTraitsVersion) {
		out = append(out, "description")
	}
	return out
}

func (h *Handler) runbookRoutes() {
	rt := route{minVersion: runbookMinVersion}
	h.handle("GET /v1/runbooks", rt, h.listRunbooks)
	h.handle("GET /v1/runbooks/{runbook}", rt, h.getRunbook)
	h.handle("POST /v1/runbooks", rt, h.createRunbook)
	h.handle("PATCH /v1/runbooks/{runbook}", rt, h.patchRunbook)
	h.handle("DELETE /v1/runbooks/{runbook}", rt, h.deleteRunbook)
	tr := route{minVersion: runbookTraitsVersion}
	h.handle("GET /v1/runbooks/{runbook}/traits", tr, h.listRunbookTraits)
	h.handle("PUT /v1/runbooks/{runbook}/traits", tr, h.putRunbookTraits)
	h.handle("PUT /v1/runbooks/{runbook}/traits/{trait}", tr, h.putRunbookTrait)
	h.handle("DELETE /v1/runbooks/{runbook}/traits", tr, h.deleteRunbookTraits)
	h.handle("DELETE /v1/runbooks/{runbook}/traits/{trait}", tr, h.deleteRunbookTrait)
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

// runbookView is r as Ironic shows it at the request's version; step
// arguments are masked.
func (rq *request) runbookView(r *baremetal.Runbook) map[string]any {
	v := map[string]any{
		"uuid": r.UUID, "name": r.Name, "steps": runbookSteps(r, true), "disable_ramdisk": r.DisableRamdisk,
		"public": r.Public, "owner": nullable(r.Owner), "extra": object(r.Extra),
		"created_at": timestamp(r.CreatedAt), "updated_at": timestamp(r.UpdatedAt),
		"links":       rq.links("runbooks", r.UUID),
		"description": nullable(r.Description), "traits": runbookTraitList(r),
	}
	rq.hideNewer(v, runbookFieldVersions)
	return v
}

// runbookTraitList is r's traits as a JSON list, never null.
func runbookTraitList(r *baremetal.Runbook) []string {
	if r.Traits == nil {
		return []string{}
	}
	return r.Traits
}

func (rq *request) runbook() (*baremetal.Runbook, error) {
	ident := rq.r.PathValue("runbook")
	r, err := rq.h.store.Runbooks().Get(rq.ctx, ident)
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
	list, err := h.store.Runbooks().List(rq.ctx, baremetal.RunbookFilter{Owner: rq.r.URL.Query().Get("owner")}, page)
	if err != nil {
		return err
	}
	if fields == nil && !detail {
		fields = runbookListFields
	}
	return listReply(rq, "runbooks", "runbooks", list, page, fields, rq.runbookView,
		func(r *baremetal.Runbook) string { return r.UUID })
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

// setRunbook copies the members of doc into r. Before 1.112 the name
// must be a trait, as Ironic's RUNBOOK_SCHEMA has it; from 1.112 any
// logical name, and a description of at most 255 characters.
func (rq *request) setRunbook(doc map[string]any, r *baremetal.Runbook) error {
	var err error
	if r.Name, err = str(doc, "name"); err != nil {
		return err
	}
	if rq.v.AtLeast(runbookTraitsVersion) {
		if p := baremetal.CheckNodeName(r.UUID, r.Name); p != nil || r.Name == "" {
			return badRequest("Invalid input for field/attribute name. Value: %s. Expected a logical name of 1 to 255 letters, digits, '-', '.', '_' or '~'", jsonText(r.Name))
		}
		if r.Description, err = str(doc, "description"); err != nil {
			return err
		}
		if len([]rune(r.Description)) > 255 {
			return badRequest("Invalid input for field/attribute description. Value: %s. '%s' is too long", jsonText(r.Description), r.Description)
		}
	} else if err := checkTraitField("name", r.Name); err != nil {
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
	if _, ok := body["description"]; ok && !rq.v.AtLeast(runbookTraitsVersion) {
		// Ironic's RUNBOOK_SCHEMA of these versions has no description.
		return badRequest("Unknown attribute description.")
	}
	if _, ok := body["name"]; !ok {
		return badRequest("Mandatory field missing: name")
	}
	r := &baremetal.Runbook{}
	if r.UUID, err = str(body, "uuid"); err != nil {
		return err
	}
	if err := rq.setRunbook(body, r); err != nil {
		return err
	}
	// No traits until /traits gives some, as Ironic's post sets them.
	r.Traits = []string{}
	if err := h.store.Runbooks().Create(rq.ctx, r); err != nil {
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
	patchable := runbookPatchable(rq.v)
	for _, p := range ops {
		if !slices.Contains(patchable, p.rootField()) {
			return badRequest("Cannot patch %s. Only the following can be updated: %s", p.Path, strings.Join(patchable, ", "))
		}
	}
	before := map[string]any{"uuid": r.UUID, "name": r.Name, "steps": runbookSteps(r, false),
		"disable_ramdisk": r.DisableRamdisk, "public": r.Public, "owner": nullable(r.Owner),
		"extra": object(r.Extra), "description": nullable(r.Description)}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	if err := rq.setRunbook(after, r); err != nil {
		return err
	}
	if err := h.store.Runbooks().Update(rq.ctx, r); err != nil {
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
	if err := h.store.Runbooks().Delete(rq.ctx, r.UUID); err != nil {
		return notFoundAs(err, "Runbook %s could not be found.", r.UUID)
	}
	return rq.status(http.StatusNoContent)
}

// GET /v1/runbooks/{runbook}/traits (1.112): {"traits": [...]}.
func (h *Handler) listRunbookTraits(rq *request) error {
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, map[string]any{"traits": runbookTraitList(r)})
}

// setRunbookTraits writes the traits change makes of r's, as a
// compare-and-swap retried on a concurrent update.
func (rq *request) setRunbookTraits(r *baremetal.Runbook, change func([]string) []string) error {
	id := r.UUID
	for {
		r.Traits = change(slices.Clone(r.Traits))
		slices.Sort(r.Traits)
		r.Traits = slices.Compact(r.Traits)
		err := rq.h.store.Runbooks().Update(rq.ctx, r)
		if !errors.Is(err, baremetal.ErrConflict) {
			return runbookWriteError(err)
		}
		if r, err = rq.h.store.Runbooks().Get(rq.ctx, id); err != nil {
			return notFoundAs(err, "Runbook %s could not be found.", id)
		}
	}
}

// PUT /v1/runbooks/{runbook}/traits (1.112): replace them all with the
// body's {"traits": [...]}; 204.
func (h *Handler) putRunbookTraits(rq *request) error {
	var doc map[string]any
	if err := rq.decode(&doc); err != nil {
		return err
	}
	list, ok := doc["traits"]
	for k := range doc {
		if k != "traits" {
			return badRequest("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	if !ok || list == nil {
		return badRequest("A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body.")
	}
	raw, isList := list.([]any)
	if !isList {
		return badRequest("Invalid input for field/attribute traits. Value: %s. Expected a list of traits", jsonText(list))
	}
	traits := make([]string, 0, len(raw))
	for _, x := range raw {
		t, isStr := x.(string)
		if !isStr {
			return badRequest("Invalid input for field/attribute traits. Value: %s. Expected a list of traits", jsonText(list))
		}
		if err := checkTrait(t); err != nil {
			return err
		}
		traits = append(traits, t)
	}
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	if err := rq.setRunbookTraits(r, func([]string) []string { return traits }); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}

// PUT /v1/runbooks/{runbook}/traits/{trait} (1.112): add one, no body;
// 204 with its Location.
func (h *Handler) putRunbookTrait(rq *request) error {
	trait := rq.r.PathValue("trait")
	var doc any
	if has, err := rq.decodeOptional(&doc); err != nil {
		return err
	} else if m, isMap := doc.(map[string]any); has && doc != nil && (!isMap || len(m) > 0) {
		return badRequest("No body should be provided when adding a trait")
	}
	if err := checkTrait(trait); err != nil {
		return err
	}
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	if err := rq.setRunbookTraits(r, func(cur []string) []string { return append(cur, trait) }); err != nil {
		return err
	}
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/runbooks/"+rq.r.PathValue("runbook")+"/traits/"+trait)
	return rq.status(http.StatusNoContent)
}

// DELETE /v1/runbooks/{runbook}/traits (1.112): remove them all; 204.
func (h *Handler) deleteRunbookTraits(rq *request) error {
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	if err := rq.setRunbookTraits(r, func([]string) []string { return []string{} }); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}

// DELETE /v1/runbooks/{runbook}/traits/{trait} (1.112): remove one; a
// trait the runbook lacks is no error (Ironic's RunbookTraitNotFound is
// ignored there); 204.
func (h *Handler) deleteRunbookTrait(rq *request) error {
	trait := rq.r.PathValue("trait")
	r, err := rq.runbook()
	if err != nil {
		return err
	}
	if slices.Contains(r.Traits, trait) {
		err = rq.setRunbookTraits(r, func(cur []string) []string {
			return slices.DeleteFunc(cur, func(t string) bool { return t == trait })
		})
		if err != nil {
			return err
		}
	}
	return rq.status(http.StatusNoContent)
}

// runbookApproved is Ironic's check (the API's _handle_runbook) that rb
// may run on n: from 1.112 n has one of rb's traits, and a runbook
// without traits runs nowhere; before, n has rb's name as a trait. The
// conductor checks again under the node's lock.
func (rq *request) runbookApproved(rb *baremetal.Runbook, n *baremetal.Node) error {
	if !rq.v.AtLeast(runbookTraitsVersion) {
		if slices.Contains(n.Traits, rb.Name) {
			return nil
		}
		return badRequest("This runbook has not been approved for use on this node %s. Please ask an administrator to add it to your node traits.", n.UUID)
	}
	if len(rb.Traits) == 0 {
		return badRequest("Runbook %s has no traits configured. Please ask an administrator to add traits to the runbook.", rb.UUID)
	}
	for _, t := range rb.Traits {
		if slices.Contains(n.Traits, t) {
			return nil
		}
	}
	quoted := make([]string, len(rb.Traits))
	for i, t := range rb.Traits {
		quoted[i] = "'" + t + "'"
	}
	return badRequest("This runbook has not been approved for use on this node %s. The node does not have any of the runbook's traits [%s]. Please ask an administrator to add a matching trait to your node.", n.UUID, strings.Join(quoted, ", "))
}
