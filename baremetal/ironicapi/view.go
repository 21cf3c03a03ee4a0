package ironicapi

import (
	"net/url"
	"strings"
	"time"
)

// timeFormat is how Ironic's API writes timestamps (Python's isoformat
// with the UTC offset).
const timeFormat = "2006-01-02T15:04:05.000000-07:00"

// timestamp is t in Ironic's format, or nil for the zero time.
func timestamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeFormat)
}

// nullable is s, or nil (JSON null) for "".
func nullable[S ~string](s S) any {
	if s == "" {
		return nil
	}
	return string(s)
}

// object is m, or an empty object for nil (Ironic's dict fields are never
// null).
func object(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// parseFields reads ?fields=a,b,c (API 1.8) and checks each name against
// allowed (a field name and the microversion that introduced it). An
// unknown field, or one newer than the request's version, is Ironic's 406
// or 400. nil means every field.
func (rq *request) parseFields(allowed map[string]int) ([]string, error) {
	raw, ok := rq.r.URL.Query()["fields"]
	if !ok {
		return nil, nil
	}
	if !rq.v.AtLeast(8) {
		return nil, notAcceptable("Request not acceptable.")
	}
	var out []string
	for _, part := range raw {
		for _, f := range strings.Split(part, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			minor, known := allowed[f]
			if !known {
				return nil, badRequest("Field(s) \"%s\" are not valid", f)
			}
			if !rq.v.AtLeast(minor) {
				return nil, notAcceptable("Request not acceptable.")
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// filterView keeps only fields (always with links when fields is set, as
// Ironic does); nil fields keeps everything.
func filterView(view map[string]any, fields []string) map[string]any {
	if fields == nil {
		return view
	}
	out := make(map[string]any, len(fields)+1)
	for _, f := range fields {
		if v, ok := view[f]; ok {
			out[f] = v
		}
	}
	if l, ok := view["links"]; ok {
		out["links"] = l
	}
	return out
}

// hideNewer drops the fields of view newer than the request's version.
func (rq *request) hideNewer(view map[string]any, versions map[string]int) {
	for f, minor := range versions {
		if !rq.v.AtLeast(minor) {
			delete(view, f)
		}
	}
}

// nextURL is the "next" link of a listing page whose last item is
// marker, carrying the request's query with marker replaced.
func (rq *request) nextURL(resource, marker string, limit int) string {
	q := url.Values{}
	for k, v := range rq.r.URL.Query() {
		if k == "marker" || k == "limit" {
			continue
		}
		q[k] = v
	}
	q.Set("limit", itoa(limit))
	q.Set("marker", marker)
	return rq.baseURL() + "/v1/" + resource + "?" + q.Encode()
}
