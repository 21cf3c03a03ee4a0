package ironicapi

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/steps"
	"github.com/google/uuid"
)

func (h *Handler) nodeMiscRoutes() {
	h.handle("PUT /v1/nodes/{node}/maintenance", route{}, h.putMaintenance)
	h.handle("DELETE /v1/nodes/{node}/maintenance", route{}, h.deleteMaintenance)
	// Before 1.37 Ironic's routing answers a GET 406, a PUT 405 and a
	// DELETE 404 (the node controller's get, missing put and delete see
	// the extra path elements); traitsBefore37 does the same.
	h.handle("GET /v1/nodes/{node}/traits", route{}, traitsBefore37(http.StatusNotAcceptable, h.getTraits))
	h.handle("PUT /v1/nodes/{node}/traits", route{}, traitsBefore37(http.StatusMethodNotAllowed, h.putTraits))
	h.handle("DELETE /v1/nodes/{node}/traits", route{}, traitsBefore37(http.StatusNotFound, h.deleteTraits))
	h.handle("PUT /v1/nodes/{node}/traits/{trait}", route{}, traitsBefore37(http.StatusMethodNotAllowed, h.putTrait))
	h.handle("DELETE /v1/nodes/{node}/traits/{trait}", route{}, traitsBefore37(http.StatusNotFound, h.deleteTrait))
	h.handle("GET /v1/nodes/{node}/inventory", route{minVersion: 81}, h.getInventory)
	h.handle("GET /v1/nodes/{node}/history", route{minVersion: 78}, h.listHistory)
	h.handle("GET /v1/nodes/{node}/history/{event}", route{minVersion: 78}, h.getHistory)
}

// decodeOptional reads an optional JSON body into dst: an empty body
// leaves dst alone and reports false.
func (rq *request) decodeOptional(dst any) (bool, error) {
	body, err := io.ReadAll(rq.r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return false, Errorf(http.StatusRequestEntityTooLarge, "Request body is larger than %d bytes.", mbe.Limit)
		}
		return false, badRequest("Cannot read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return false, nil
	}
	rq.r.Body = io.NopCloser(bytes.NewReader(body))
	return true, rq.decode(dst)
}

// PUT /v1/nodes/{node}/maintenance {"reason": "..."}: 202.
func (h *Handler) putMaintenance(rq *request) error {
	var doc map[string]any
	if _, err := rq.decodeOptional(&doc); err != nil {
		return err
	}
	reason := ""
	for k, v := range doc {
		if k != "reason" {
			return badRequest("Unknown argument: \"%s\"", k)
		}
		s, err := asString("", "reason", v)
		if err != nil {
			return badRequest("Invalid input for field/attribute reason. Value: %v. Wrong type. Expected a string.", v)
		}
		reason = s
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.c.SetMaintenance(rq.ctx, n.UUID, true, reason); err != nil {
		return verbError("maintenance", n, err)
	}
	return rq.status(http.StatusAccepted)
}

// DELETE /v1/nodes/{node}/maintenance: 202.
func (h *Handler) deleteMaintenance(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.c.SetMaintenance(rq.ctx, n.UUID, false, ""); err != nil {
		return verbError("maintenance", n, err)
	}
	return rq.status(http.StatusAccepted)
}

// maxTraitsPerNode is Ironic's MAX_TRAITS_PER_NODE.
const maxTraitsPerNode = 50

// checkTrait validates a trait name as Ironic's schema does: 1 to 255
// characters, CUSTOM_ followed by upper-case letters, digits and
// underscores, or a standard trait (an upper-case identifier; the
// os-traits catalogue itself is not carried).
func checkTrait(t string) error { return checkTraitField("trait", t) }

// checkTraitField is checkTrait for the request member field.
func checkTraitField(field, t string) error {
	if steps.ValidTraitName(t) && (!strings.HasPrefix(t, "CUSTOM_") || len(t) > len("CUSTOM_")) {
		return nil
	}
	v, _ := json.Marshal(t)
	if len(v) > 80 {
		v = append(v[:77], "..."...)
	}
	return badRequest("Invalid input for field/attribute %s. Value: %s. %s is not a valid trait: expected CUSTOM_ followed by upper-case letters, digits or underscores, or a standard trait, of at most 255 characters", field, v, v)
}

// traitsBefore37 answers status before 1.37 with Ironic's error for it,
// and calls fn from 1.37.
func traitsBefore37(status int, fn handlerFunc) handlerFunc {
	return func(rq *request) error {
		if rq.v.AtLeast(37) {
			return fn(rq)
		}
		switch status {
		case http.StatusNotAcceptable:
			return notAcceptable("Request not acceptable.")
		case http.StatusMethodNotAllowed:
			return Errorf(http.StatusMethodNotAllowed, "The method specified is not allowed for this resource.")
		}
		return notFound("The resource could not be found.")
	}
}

// GET /v1/nodes/{node}/traits
func (h *Handler) getTraits(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	traits := slices.Clone(n.Traits)
	if traits == nil {
		traits = []string{}
	}
	slices.Sort(traits)
	return rq.reply(http.StatusOK, map[string]any{"traits": traits})
}

// setTraits writes the node's traits through the conductor's Update
// (under the node's lock, in any provision state as Ironic's
// add_node_traits), refusing more than maxTraitsPerNode.
func (h *Handler) setTraits(rq *request, n *baremetal.Node, change func(cur []string) []string) error {
	_, err := h.c.UpdateWith(rq.ctx, n.UUID, conductor.UpdateOptions{TraitsInAnyState: true}, func(cur *baremetal.Node) error {
		next := change(slices.Clone(cur.Traits))
		slices.Sort(next)
		next = slices.Compact(next)
		if len(next) > maxTraitsPerNode {
			return badRequest("Could not modify traits for node %s as it would exceed the maximum number of traits per node (%d vs. %d)",
				cur.UUID, len(next), maxTraitsPerNode)
		}
		if len(next) == 0 {
			next = nil
		}
		cur.Traits = next
		return nil
	})
	return err
}

const traitsUsage = "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, " +
	"or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body."

// PUT /v1/nodes/{node}/traits {"traits": [...]}: replace all; 204.
func (h *Handler) putTraits(rq *request) error {
	var doc map[string]any
	has, err := rq.decodeOptional(&doc)
	if err != nil {
		return err
	}
	raw, ok := doc["traits"]
	if !has || !ok || raw == nil {
		return badRequest("%s", traitsUsage)
	}
	for k := range doc {
		if k != "traits" {
			return badRequest("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	list, ok := raw.([]any)
	if !ok {
		return badRequest("Invalid input for field/attribute traits. Expected a list of traits.")
	}
	if len(list) > maxTraitsPerNode {
		// Checked again under the lock; refusing early bounds the work.
		return badRequest("Could not modify traits for node %s as it would exceed the maximum number of traits per node (%d vs. %d)",
			rq.r.PathValue("node"), len(list), maxTraitsPerNode)
	}
	traits := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return badRequest("Invalid input for field/attribute traits. Expected a list of strings.")
		}
		if err := checkTrait(s); err != nil {
			return err
		}
		traits = append(traits, s)
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.setTraits(rq, n, func([]string) []string { return traits }); err != nil {
		return verbError("set traits", n, err)
	}
	return rq.status(http.StatusNoContent)
}

// PUT /v1/nodes/{node}/traits/{trait}: add one, no body; 204 with its
// Location.
func (h *Handler) putTrait(rq *request) error {
	trait := rq.r.PathValue("trait")
	var doc any
	if has, err := rq.decodeOptional(&doc); err != nil {
		return err
	} else if m, isMap := doc.(map[string]any); has && doc != nil && (!isMap || len(m) > 0) {
		// An empty object is no traits argument to Ironic's put, as
		// ironic-tempest-plugin's client sends it.
		return badRequest("No body should be provided when adding a trait")
	}
	if err := checkTrait(trait); err != nil {
		return err
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.setTraits(rq, n, func(cur []string) []string { return append(cur, trait) }); err != nil {
		return verbError("add trait", n, err)
	}
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/nodes/"+rq.r.PathValue("node")+"/traits/"+trait)
	return rq.status(http.StatusNoContent)
}

// DELETE /v1/nodes/{node}/traits: remove all; 204.
func (h *Handler) deleteTraits(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.setTraits(rq, n, func([]string) []string { return nil }); err != nil {
		return verbError("remove traits", n, err)
	}
	return rq.status(http.StatusNoContent)
}

// DELETE /v1/nodes/{node}/traits/{trait}: remove one; 404 when the node
// does not have it; 204.
func (h *Handler) deleteTrait(rq *request) error {
	trait := rq.r.PathValue("trait")
	n, err := rq.node()
	if err != nil {
		return err
	}
	missing := notFound("Node %s doesn't have a trait '%s'", n.UUID, trait)
	if !slices.Contains(n.Traits, trait) {
		return missing
	}
	err = h.setTraits(rq, n, func(cur []string) []string {
		return slices.DeleteFunc(cur, func(t string) bool { return t == trait })
	})
	if err != nil {
		return verbError("remove trait", n, err)
	}
	return rq.status(http.StatusNoContent)
}

// GET /v1/nodes/{node}/inventory (1.81): {"inventory", "plugin_data"}.
func (h *Handler) getInventory(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	inv, err := h.c.NodeInventory(rq.ctx, n.UUID)
	if errors.Is(err, baremetal.ErrNotFound) {
		return notFound("Node inventory record for node %s could not be found.", n.UUID)
	}
	if err != nil {
		return err
	}
	pd := inv.PluginData
	if len(bytes.TrimSpace(pd)) == 0 {
		pd = json.RawMessage(`{}`)
	}
	body := inv.Inventory
	if len(bytes.TrimSpace(body)) == 0 {
		body = json.RawMessage(`{}`)
	}
	return rq.reply(http.StatusOK, map[string]json.RawMessage{"inventory": body, "plugin_data": pd})
}

// historyFieldsVersion is the microversion (Ironic's 1.115) from which a
// detailed history entry carries state, target_provision_state and
// duration_seconds; historyProjectVersion (1.113) the one from which it
// carries project.
const (
	historyFieldsVersion  = 115
	historyProjectVersion = 113
)

// historyUUID is the UUID of a history entry. The store keys entries by
// number, Ironic's API by UUID, so the UUID carries the number: it is an
// RFC 9562 version-8 UUID whose first eight bytes are the node's (the
// start of a SHA-1 of the node's UUID) and whose last eight hold the
// entry's number under the variant bits. A marker or an entry's UUID
// thus names one row, found by key in the store (historyID), and the
// UUID of an entry never changes.
func historyUUID(nodeUUID string, id int64) string {
	var u uuid.UUID
	prefix := historyPrefix(nodeUUID)
	copy(u[:8], prefix[:])
	binary.BigEndian.PutUint64(u[8:], uint64(id))
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return u.String()
}

// historyPrefix is the first half of the UUIDs of a node's entries,
// version nibble included.
func historyPrefix(nodeUUID string) [8]byte {
	sum := sha1.Sum([]byte("anvil node history " + strings.ToLower(nodeUUID)))
	var p [8]byte
	copy(p[:], sum[:8])
	p[6] = p[6]&0x0f | 0x80 // version 8
	return p
}

// historyID returns the entry number a history UUID of the node carries,
// or false when s is not the UUID of one of the node's entries.
func historyID(nodeUUID, s string) (int64, bool) {
	u, err := uuid.Parse(s)
	if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
		return 0, false
	}
	if p := historyPrefix(nodeUUID); !bytes.Equal(u[:8], p[:]) {
		return 0, false
	}
	id := int64(binary.BigEndian.Uint64(u[8:]) &^ (0xc0 << 56))
	return id, id > 0
}

// historyView is one entry as Ironic shows it: uuid, created_at,
// severity, event and links; detail adds event_type, conductor and user,
// from 1.113 project (always null: Anvil's callers have no project, as
// Ironic's noauth and http_basic callers have none), and from 1.115
// state, target_provision_state and duration_seconds
// (whole seconds, as Ironic stores them; null when unknown). Without
// detail the event text is cut at 255 characters, as Ironic does.
func (rq *request) historyView(nodeUUID string, e *baremetal.HistoryEntry, detail bool) map[string]any {
	id := historyUUID(nodeUUID, e.ID)
	text := e.Message
	if text == "" {
		text = e.Event
	}
	text = baremetal.MaskText(text)
	if !detail && len(text) > 255 {
		text = text[:251] + "..."
	}
	v := map[string]any{
		"uuid":       id,
		"created_at": timestamp(e.CreatedAt),
		"severity":   e.Severity,
		"event":      text,
		"links":      []Link{{Href: rq.baseURL() + "/v1/nodes/" + nodeUUID + "/history/" + id, Rel: "self"}},
	}
	if detail {
		v["event_type"] = e.EventType
		v["conductor"] = nullable(e.Conductor)
		v["user"] = nullable(e.User)
		if rq.v.AtLeast(historyProjectVersion) {
			v["project"] = nil
		}
		if rq.v.AtLeast(historyFieldsVersion) {
			v["state"] = nullable(e.State)
			v["target_provision_state"] = nullable(e.TargetState)
			v["duration_seconds"] = nil
			if e.Duration != nil {
				v["duration_seconds"] = int64(e.Duration.Seconds())
			}
		}
	}
	return v
}

// GET /v1/nodes/{node}/history (1.78): ?detail, ?limit, ?marker (an
// entry's UUID), ?sort_dir on created_at.
func (h *Handler) listHistory(rq *request) error {
	q := rq.r.URL.Query()
	detail := false
	if s := q.Get("detail"); s != "" {
		b, err := parseBoolParam("detail", s)
		if err != nil {
			return err
		}
		detail = b
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	dir, err := parseSortDir(q)
	if err != nil {
		return err
	}
	if k := q.Get("sort_key"); k != "" && k != "created_at" && k != "id" {
		return badRequest("The sort_key value \"%s\" is an invalid field for sorting", k)
	}
	marker := q.Get("marker")
	if marker != "" && !looksLikeUUID(marker) {
		return badRequest("Expected a UUID for marker: %s", marker)
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	page := baremetal.HistoryPage{Descending: dir == "desc", ByID: q.Get("sort_key") == "id", Limit: limit + 1}
	if marker != "" {
		id, ok := historyID(n.UUID, marker)
		if !ok {
			return notFound("Node history record %s could not be found.", marker)
		}
		page.After = id
	}
	// One more than the page tells whether a next page exists.
	entries, err := h.store.PageHistory(rq.ctx, n.UUID, page)
	if errors.Is(err, baremetal.ErrNotFound) && marker != "" {
		var nf *baremetal.NotFoundError
		if errors.As(err, &nf) && nf.Kind == "history" {
			return notFound("Node history record %s could not be found.", marker)
		}
	}
	if err != nil {
		return err
	}
	more := len(entries) > limit
	if more {
		entries = entries[:limit]
	}
	out := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		out = append(out, rq.historyView(n.UUID, e, detail))
	}
	body := map[string]any{"history": out}
	if more && len(entries) > 0 {
		body["next"] = rq.nextURL("nodes/"+rq.r.PathValue("node")+"/history", historyUUID(n.UUID, entries[len(entries)-1].ID), limit)
	}
	return rq.reply(http.StatusOK, body)
}

// GET /v1/nodes/{node}/history/{event} (1.78): one entry, in detail.
func (h *Handler) getHistory(rq *request) error {
	ev := rq.r.PathValue("event")
	n, err := rq.node()
	if err != nil {
		return err
	}
	id, ok := historyID(n.UUID, ev)
	if !ok {
		return notFound("Node history record %s could not be found.", ev)
	}
	e, err := h.store.GetHistory(rq.ctx, n.UUID, id)
	var nf *baremetal.NotFoundError
	if errors.As(err, &nf) && nf.Kind == "history" {
		return notFound("Node history record %s could not be found.", ev)
	}
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, rq.historyView(n.UUID, e, true))
}
