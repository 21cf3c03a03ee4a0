package ironicapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/anvilmetal/anvil/baremetal"
)

// chassisFieldVersions are the chassis fields with the microversion that
// introduced each: every one exists since 1.0 (fields and detail have
// their own gates, 1.8 and 1.43).
var chassisFieldVersions = map[string]int{
	"uuid": 1, "description": 1, "extra": 1, "created_at": 1, "updated_at": 1, "links": 1, "nodes": 1,
}

// chassisListFields are a listing's fields without detail (Ironic's
// DEFAULT_RETURN_FIELDS; links are always kept).
var chassisListFields = []string{"uuid", "description", "links"}

// chassisBodyFields are the members of Ironic's CHASSIS_SCHEMA: what a
// create body may hold and what a patch may change.
var chassisBodyFields = []string{"uuid", "extra", "description"}

func (h *Handler) chassisRoutes() {
	rt := route{}
	h.handle("GET /v1/chassis", rt, h.listChassis(false))
	h.handle("GET /v1/chassis/detail", rt, h.listChassis(true))
	h.handle("GET /v1/chassis/{chassis}", rt, h.getChassis)
	h.handle("POST /v1/chassis", rt, h.createChassis)
	h.handle("PATCH /v1/chassis/{chassis}", rt, h.patchChassis)
	h.handle("DELETE /v1/chassis/{chassis}", rt, h.deleteChassis)
	// A chassis' nodes are Ironic's node listing filtered by the chassis;
	// everything else under it is a malformed URI, as Ironic's nodes
	// controller answers when reached through a chassis.
	h.handle("GET /v1/chassis/{chassis}/nodes", rt, h.listNodes(false))
	h.handle("GET /v1/chassis/{chassis}/nodes/detail", rt, h.listNodes(true))
	malformed := func(*request) error { return badRequest("Malformed request URI.") }
	for _, p := range []string{"GET /v1/chassis/{chassis}/nodes/{node}", "POST /v1/chassis/{chassis}/nodes",
		"PATCH /v1/chassis/{chassis}/nodes/{node}", "DELETE /v1/chassis/{chassis}/nodes/{node}"} {
		h.handle(p, rt, malformed)
	}
}

// chassisView is c as Ironic shows it. Its "nodes" is a list holding the
// list of links: Ironic master builds it with a trailing comma that makes
// a tuple, and its response schema documents the nesting.
func (rq *request) chassisView(c *baremetal.Chassis) map[string]any {
	return map[string]any{
		"uuid":        c.UUID,
		"description": nullable(c.Description),
		"extra":       object(c.Extra),
		"created_at":  timestamp(c.CreatedAt),
		"updated_at":  updatedAt(c.UpdatedAt, c.Version),
		"links":       rq.links("chassis", c.UUID),
		"nodes":       [][]Link{rq.links("chassis", c.UUID+"/nodes")},
	}
}

// updatedAt is a resource's updated_at as Ironic shows it: null until
// the first update (the store's version 1 is the row as created).
func updatedAt(t time.Time, version int64) any {
	if version <= 1 {
		return nil
	}
	return timestamp(t)
}

// pathUUID reads the path wildcard name, which Ironic validates as a
// UUID before anything else.
func (rq *request) pathUUID(name, param string) (string, error) {
	v := rq.r.PathValue(name)
	if !looksLikeUUID(v) {
		return "", badRequest("Expected UUID for %s: %s", param, v)
	}
	return strings.ToLower(v), nil
}

// chassis finds the chassis the path names.
func (rq *request) chassis(param string) (*baremetal.Chassis, error) {
	id := rq.r.PathValue("chassis")
	if param != "" {
		var err error
		if id, err = rq.pathUUID("chassis", param); err != nil {
			return nil, err
		}
	}
	c, err := rq.h.store.Chassis().Get(rq.ctx, id)
	if err != nil {
		return nil, notFoundAs(err, "Chassis %s could not be found.", id)
	}
	return c, nil
}

// sortedPage reads ?limit, ?marker, ?sort_key and ?sort_dir as Ironic's
// resource listings check them: a limit is positive (and capped), the
// marker a UUID, the direction asc or desc, and the key a sortable
// column; unsortable names Ironic's invalid_sort_key_list.
func (rq *request) sortedPage(sortable, unsortable []string) (baremetal.Page, error) {
	q := rq.r.URL.Query()
	limit, err := parseLimit(q)
	if err != nil {
		return baremetal.Page{}, err
	}
	dir, err := parseSortDir(q)
	if err != nil {
		return baremetal.Page{}, err
	}
	key := "id"
	if k, ok := q["sort_key"]; ok {
		key = k[0]
	}
	if slices.Contains(unsortable, key) {
		return baremetal.Page{}, badRequest("The sort_key value %s is an invalid field for sorting", key)
	}
	if !slices.Contains(sortable, key) {
		return baremetal.Page{}, badRequest("The sort_key value \"%s\" is an invalid field for sorting", key)
	}
	page := baremetal.Page{Limit: limit, SortKey: key, SortDesc: dir == "desc"}
	if m, ok := q["marker"]; ok && m[0] != "" {
		if !looksLikeUUID(m[0]) {
			return baremetal.Page{}, badRequest("Expected UUID for marker: %s", m[0])
		}
		page.Marker = strings.ToLower(m[0])
	}
	return page, nil
}

// detailParam reads ?detail as Ironic's boolean argument: its value and
// whether it was given.
func (rq *request) detailParam() (bool, bool, error) {
	s, ok := rq.r.URL.Query()["detail"]
	if !ok {
		return false, false, nil
	}
	d, err := parseBoolParam("detail", s[0])
	return d, true, err
}

// checkQuery refuses query parameters a route does not take, as the
// query schemas of Ironic's resources do.
func (rq *request) checkQuery(allowed ...string) error {
	for k := range rq.r.URL.Query() {
		if !slices.Contains(allowed, k) {
			return badRequest("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	return nil
}

// GET /v1/chassis and /v1/chassis/detail
func (h *Handler) listChassis(detailPath bool) handlerFunc {
	return func(rq *request) error {
		allowed := []string{"limit", "marker", "sort_key", "sort_dir"}
		if !detailPath {
			allowed = append(allowed, "fields", "detail")
		}
		if err := rq.checkQuery(allowed...); err != nil {
			return err
		}
		fields, err := rq.parseFields(chassisFieldVersions)
		if err != nil {
			return err
		}
		detail, given, err := rq.detailParam()
		if err != nil {
			return err
		}
		// Ironic's get_request_return_fields: a 400 below 1.43, the
		// parsed value printed as Python prints it.
		if given && !rq.v.AtLeast(43) {
			return badRequest("Invalid query parameter ?detail=%s received.", pyRepr(detail))
		}
		if fields != nil && detail {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		page, err := rq.sortedPage(baremetal.ChassisSortKeys(), []string{"extra"})
		if err != nil {
			return err
		}
		if page.Marker != "" {
			if _, err := h.store.Chassis().Get(rq.ctx, page.Marker); err != nil {
				return notFoundAs(err, "Chassis %s could not be found.", page.Marker)
			}
		}
		list, err := h.store.Chassis().List(rq.ctx, baremetal.ChassisFilter{}, page)
		if err != nil {
			return err
		}
		if fields == nil && !detail && !detailPath {
			fields = chassisListFields
		}
		res := "chassis"
		if detailPath {
			res = "chassis/detail"
		}
		return listReply(rq, "chassis", res, list, page, fields, rq.chassisView,
			func(c *baremetal.Chassis) string { return c.UUID })
	}
}

// GET /v1/chassis/{chassis}
func (h *Handler) getChassis(rq *request) error {
	if _, err := rq.pathUUID("chassis", "chassis_uuid"); err != nil {
		return err
	}
	fields, err := rq.parseFields(chassisFieldVersions)
	if err != nil {
		return err
	}
	c, err := rq.chassis("chassis_uuid")
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.chassisView(c), fields))
}

// pyRepr writes a decoded JSON value as Python's repr does, as Ironic's
// schema errors quote values.
func pyRepr(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case bool:
		if t {
			return "True"
		}
		return "False"
	case string:
		if strings.Contains(t, "'") && !strings.Contains(t, `"`) {
			return `"` + t + `"`
		}
		return "'" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), "'", `\'`) + "'"
	case json.Number:
		return t.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// schemaError is Ironic's wording of a document (named as its API
// argument: "chassis", "patch", "connector", "target") that fails its
// JSON schema.
func schemaError(doc, format string, args ...any) *Error {
	return badRequest("Schema error for "+doc+": "+format, args...)
}

// schemaString reads an optional string member of doc (null allowed when
// nullOK; max characters when positive), with the schema's messages.
func schemaString(doc string, body map[string]any, key string, nullOK bool, max int) (string, error) {
	v, ok := body[key]
	if !ok {
		return "", nil
	}
	switch t := v.(type) {
	case nil:
		if nullOK {
			return "", nil
		}
	case string:
		if max > 0 && utf8.RuneCountInString(t) > max {
			return "", schemaError(doc, "%s is too long", pyRepr(t))
		}
		return t, nil
	}
	if nullOK {
		return "", schemaError(doc, "%s is not of type 'string', 'null'", pyRepr(v))
	}
	return "", schemaError(doc, "%s is not of type 'string'", pyRepr(v))
}

// schemaObject reads an optional object-or-null member of doc.
func schemaObject(doc string, body map[string]any, key string) (map[string]any, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, schemaError(doc, "%s is not of type 'object', 'null'", pyRepr(v))
	}
	return m, nil
}

// schemaMembers refuses members outside allowed and missing required
// ones, as additionalProperties false and required do.
func schemaMembers(doc string, body map[string]any, allowed, required []string) error {
	var extra []string
	for k := range body {
		if !slices.Contains(allowed, k) {
			extra = append(extra, "'"+k+"'")
		}
	}
	switch slices.Sort(extra); len(extra) {
	case 0:
	case 1:
		return schemaError(doc, "Additional properties are not allowed (%s was unexpected)", extra[0])
	default:
		return schemaError(doc, "Additional properties are not allowed (%s were unexpected)", strings.Join(extra, ", "))
	}
	for _, r := range required {
		if _, ok := body[r]; !ok {
			return schemaError(doc, "'%s' is a required property", r)
		}
	}
	return nil
}

// setChassisFields validates doc as Ironic's CHASSIS_SCHEMA (named doc
// in errors) and writes description and extra onto c; it returns the
// UUID doc names ("" for none).
func setChassisFields(c *baremetal.Chassis, doc string, body map[string]any) (string, error) {
	if err := schemaMembers(doc, body, chassisBodyFields, nil); err != nil {
		return "", err
	}
	id, err := schemaString(doc, body, "uuid", true, 0)
	if err != nil {
		return "", err
	}
	if c.Description, err = schemaString(doc, body, "description", true, baremetal.MaxChassisDescription); err != nil {
		return "", err
	}
	if c.Extra, err = schemaObject(doc, body, "extra"); err != nil {
		return "", err
	}
	if id != "" && !looksLikeUUID(id) {
		return "", badRequest("Expected UUID for uuid: %s", id)
	}
	return strings.ToLower(id), nil
}

// chassisWriteError maps a store error of a chassis write to Ironic's
// messages.
func chassisWriteError(err error) error {
	var de *baremetal.DuplicateError
	if errors.As(err, &de) && de.Field == "uuid" {
		return Errorf(http.StatusConflict, "A chassis with UUID %s already exists.", de.Value)
	}
	var ife *baremetal.InvalidFieldError
	if errors.As(err, &ife) {
		return badRequest("Invalid chassis %s: expected %s", ife.Field, ife.Expected)
	}
	var ne *baremetal.ChassisNotEmptyError
	if errors.As(err, &ne) {
		return badRequest("%s", ne.Error())
	}
	return err
}

// POST /v1/chassis
func (h *Handler) createChassis(rq *request) error {
	var body map[string]any
	if err := rq.decode(&body); err != nil {
		return err
	}
	if body == nil {
		return badRequest("The request body must be a JSON object describing the chassis.")
	}
	c := &baremetal.Chassis{}
	var err error
	if c.UUID, err = setChassisFields(c, "chassis", body); err != nil {
		return err
	}
	if err := h.store.Chassis().Create(rq.ctx, c); err != nil {
		return chassisWriteError(err)
	}
	return rq.created("chassis", c.UUID, rq.chassisView(c))
}

// PATCH /v1/chassis/{chassis}: the fields of CHASSIS_SCHEMA only; a
// changed UUID is refused, as Ironic's database layer refuses it.
func (h *Handler) patchChassis(rq *request) error {
	ops, err := rq.decodePatch()
	if err != nil {
		return err
	}
	for _, p := range ops {
		if !slices.Contains(chassisBodyFields, p.rootField()) {
			return badRequest("Cannot patch %s. Only the following can be updated: %s", p.Path, strings.Join(chassisBodyFields, ", "))
		}
	}
	c, err := rq.chassis("")
	if err != nil {
		return err
	}
	before := map[string]any{"id": c.ID, "uuid": c.UUID, "description": nullable(c.Description), "extra": object(c.Extra),
		"created_at": timestamp(c.CreatedAt), "updated_at": timestamp(c.UpdatedAt)}
	after, err := applyPatch(before, ops)
	if err != nil {
		return err
	}
	for k := range after {
		if !slices.Contains(chassisBodyFields, k) {
			delete(after, k)
		}
	}
	id, err := setChassisFields(c, "patch", after)
	if err != nil {
		return err
	}
	if id != c.UUID {
		return badRequest("Cannot overwrite UUID for an existing Chassis.")
	}
	if err := h.store.Chassis().Update(rq.ctx, c); err != nil {
		return chassisWriteError(notFoundAs(err, "Chassis %s could not be found.", c.UUID))
	}
	return rq.reply(http.StatusOK, rq.chassisView(c))
}

// DELETE /v1/chassis/{chassis}: a chassis that nodes name is Ironic's
// ChassisNotEmpty (400).
func (h *Handler) deleteChassis(rq *request) error {
	c, err := rq.chassis("chassis_uuid")
	if err != nil {
		return err
	}
	if err := h.store.Chassis().Delete(rq.ctx, c.UUID); err != nil {
		return chassisWriteError(notFoundAs(err, "Chassis %s could not be found.", c.UUID))
	}
	return rq.status(http.StatusNoContent)
}

// checkNodeChassis checks a node's new chassis as Ironic's node API does:
// it must exist (400 otherwise, not 404: the request is about a node),
// and removing a node's chassis needs 1.25.
func (rq *request) checkNodeChassis(was, now string) error {
	if now == "" {
		if was != "" && !rq.v.AtLeast(25) {
			return notAcceptable("Request not acceptable.")
		}
		return nil
	}
	if _, err := rq.h.store.Chassis().Get(rq.ctx, now); err != nil {
		if errors.Is(err, baremetal.ErrNotFound) {
			return badRequest("Chassis %s could not be found.", now)
		}
		return err
	}
	return nil
}

// chassisRefusal maps a node write the store refused for its chassis
// (deleted meanwhile) to Ironic's 400; other errors are returned
// unchanged.
func chassisRefusal(err error) error {
	var nf *baremetal.NotFoundError
	if errors.As(err, &nf) && nf.Kind == "chassis" {
		return badRequest("Chassis %s could not be found.", nf.Ident)
	}
	return err
}

// nodeChassisFilter reads the chassis a node listing is filtered by: the
// path's (a chassis' nodes) or ?chassis_uuid.
func (rq *request) nodeChassisFilter() (string, error) {
	if rq.r.PathValue("chassis") != "" {
		return rq.pathUUID("chassis", "chassis_uuid")
	}
	s, ok := rq.r.URL.Query()["chassis_uuid"]
	if !ok {
		return "", nil
	}
	if !looksLikeUUID(s[0]) {
		return "", badRequest("Expected UUID for chassis_uuid: %s", s[0])
	}
	return strings.ToLower(s[0]), nil
}
