package ironicapi

// versionDoc is Ironic's description of API v1 in the root documents.
func (rq *request) versionDoc() map[string]any {
	return map[string]any{
		"id":          "v1",
		"links":       []Link{{Href: rq.baseURL() + "/v1/", Rel: "self"}},
		"status":      "CURRENT",
		"min_version": MinVersion.String(),
		"version":     MaxVersion.String(),
	}
}

// GET / : the versions document.
func (h *Handler) getRoot(rq *request) error {
	return rq.reply(200, map[string]any{
		"name":            "OpenStack Ironic API",
		"description":     "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
		"default_version": rq.versionDoc(),
		"versions":        []any{rq.versionDoc()},
	})
}

// versionedResources are the top-level resources GET /v1/ links from the
// microversion that introduced them (Ironic's VERSIONED_CONTROLLERS).
var versionedResources = []struct {
	name  string
	minor int
}{
	{"portgroups", 23},
	{"volume", volumeMinVersion},
	{"lookup", 22},
	{"heartbeat", 22},
	{"conductors", 49},
	{"allocations", 52},
	{"deploy_templates", 55},
	{"continue_inspection", 84},
	{"runbooks", 92},
}

// GET /v1/ : the v1 document with links to each resource.
func (h *Handler) getV1(rq *request) error {
	base := rq.baseURL()
	doc := map[string]any{
		"id": "v1",
		"links": []Link{
			{Href: base + "/v1/", Rel: "self"},
			{Href: "https://docs.openstack.org/ironic/latest/contributor/webapi.html", Rel: "describedby", Type: "text/html"},
		},
		"media_types": map[string]string{
			"base": "application/json",
			"type": "application/vnd.openstack.ironic.v1+json",
		},
		"version": rq.versionDoc(),
	}
	for _, r := range []string{"chassis", "nodes", "ports", "drivers"} {
		doc[r] = rq.links(r, "")
	}
	for _, r := range versionedResources {
		if rq.v.AtLeast(r.minor) {
			doc[r.name] = rq.links(r.name, "")
		}
	}
	return rq.reply(200, doc)
}
