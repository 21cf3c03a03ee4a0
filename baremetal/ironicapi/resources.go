package ironicapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
)

// This file holds what the portgroup, allocation, deploy template and
// runbook endpoints share.

// page reads ?limit (capped at maxListLimit; 0 or absent is the cap) and
// ?marker.
func (rq *request) page() (baremetal.Page, error) {
	q := rq.r.URL.Query()
	limit := maxListLimit
	if s := q.Get("limit"); s != "" {
		l, err := strconv.Atoi(s)
		if err != nil || l < 0 {
			return baremetal.Page{}, badRequest("Limit must be positive")
		}
		if l > 0 && l < limit {
			limit = l
		}
	}
	return baremetal.Page{Limit: limit, Marker: q.Get("marker")}, nil
}

// listReply replies with a listing: each item's view filtered to fields,
// under key, and, when the page is full, the next link of resource after
// the last item (uuid names an item).
func listReply[T any](rq *request, key, resource string, list []*T, page baremetal.Page, fields []string,
	view func(*T) map[string]any, uuid func(*T) string) error {
	out := make([]map[string]any, 0, len(list))
	last := ""
	for _, x := range list {
		out = append(out, filterView(view(x), fields))
		last = uuid(x)
	}
	return rq.reply(http.StatusOK, rq.listBody(key, resource, out, page, last))
}

// listBody is a listing's body: the items under key and, when the page
// is full, Ironic's "next" link.
func (rq *request) listBody(key, resource string, items []map[string]any, page baremetal.Page, last string) map[string]any {
	body := map[string]any{key: items}
	if page.Limit > 0 && len(items) == page.Limit {
		body["next"] = rq.nextURL(resource, last, page.Limit)
	}
	return body
}

// detailFlag reads ?detail=True|False (the resource's detail parameter,
// from minVersion); with fields it is refused as Ironic does.
func (rq *request) detailFlag(minVersion int, fields []string) (bool, error) {
	raw := rq.r.URL.Query().Get("detail")
	if raw == "" {
		return false, nil
	}
	if !rq.v.AtLeast(minVersion) {
		return false, notAcceptable("Request not acceptable.")
	}
	d, err := strconv.ParseBool(strings.ToLower(raw))
	if err != nil {
		return false, badRequest("Invalid value for detail: %s", raw)
	}
	if d && fields != nil {
		return false, badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	return d, nil
}

// created answers 201 with the resource's Location, as Ironic does.
func (rq *request) created(resource, uuid string, view map[string]any) error {
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/"+resource+"/"+uuid)
	return rq.reply(http.StatusCreated, view)
}

// decodeResource reads a resource's JSON object body and checks its keys against
// allowed (name → minor version): an unknown key is a 400, one newer than
// the request's version a 406, as Ironic's API answers them.
func (rq *request) decodeResource(allowed map[string]int) (map[string]any, error) {
	var body map[string]any
	if err := rq.decode(&body); err != nil {
		return nil, err
	}
	if body == nil {
		return nil, badRequest("The request body must be a JSON object.")
	}
	for k := range body {
		minor, ok := allowed[k]
		if !ok {
			return nil, badRequest("Unknown attribute %s.", k)
		}
		if !rq.v.AtLeast(minor) {
			return nil, notAcceptable("Request not acceptable.")
		}
	}
	return body, nil
}

// str reads an optional string member of a decoded body (null is "").
func str(body map[string]any, key string) (string, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", badRequest("Invalid input for field/attribute %s. Value: %v. Wrong type. Expected 'str', got '%s'", key, jsonText(v), jsonType(v))
	}
	return s, nil
}

// boolean reads an optional boolean member, accepting Ironic's string
// forms ("true", "False", "1", ...); def when absent or null.
func boolean(body map[string]any, key string, def bool) (bool, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return def, nil
	}
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		switch strings.ToLower(b) {
		case "1", "t", "true", "on", "y", "yes":
			return true, nil
		case "0", "f", "false", "off", "n", "no":
			return false, nil
		}
	}
	return false, badRequest("Invalid input for field/attribute %s. Value: %v. Unrecognized value '%v', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", key, jsonText(v), jsonText(v))
}

// dict reads an optional object member (null is nil).
func dict(body map[string]any, key string) (map[string]any, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("Invalid input for field/attribute %s. Value: %v. Wrong type. Expected 'dict', got '%s'", key, jsonText(v), jsonType(v))
	}
	return m, nil
}

// stringList reads an optional list-of-strings member.
func stringList(body map[string]any, key string) ([]string, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, badRequest("Invalid input for field/attribute %s. Value: %v. Wrong type. Expected 'list', got '%s'", key, jsonText(v), jsonType(v))
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, ok := x.(string)
		if !ok {
			return nil, badRequest("Invalid input for field/attribute %s. Value: %v. Expected a list of strings", key, jsonText(v))
		}
		out = append(out, s)
	}
	return out, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "str"
	case bool:
		return "bool"
	case json.Number, float64:
		return "int"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return "NoneType"
}

// resourceError maps the errors of the new resources to Ironic's codes
// where toError's general mapping differs: a non-empty portgroup is a
// 400 (PortgroupNotEmpty is Invalid), a refused allocation removal a 409
// (InvalidState), a failed backfill a 400.
func resourceError(err error) error {
	var ve *conductor.VerbError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, baremetal.ErrPortgroupNotEmpty), errors.Is(err, conductor.ErrAllocationFailed):
		return publicError(http.StatusBadRequest, err)
	case errors.As(err, &ve) && ve.Verb == "delete allocation":
		return Errorf(http.StatusConflict, "%s", ve.Reason)
	}
	return err
}

// notFoundAs turns a store's not-found into Ironic's message for kind.
func notFoundAs(err error, format, ident string) error {
	if errors.Is(err, baremetal.ErrNotFound) {
		return notFound(format, ident)
	}
	return err
}
