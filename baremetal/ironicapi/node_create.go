package ironicapi

import (
	"net/http"
	"sort"

	"github.com/anvilmetal/anvil/baremetal"
)

// POST /v1/nodes
func (h *Handler) createNode(rq *request) error {
	var doc map[string]any
	if err := rq.decode(&doc); err != nil {
		return err
	}
	n := &baremetal.Node{}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if name, ok := doc["name"].(string); ok {
		n.Name = name
	}
	for _, k := range keys {
		if err := rq.setNodeField(n, k, doc[k]); err != nil {
			return err
		}
	}
	if n.Driver == "" {
		return badRequest("Mandatory field missing: driver is required to create a node.")
	}
	created, err := h.c.Enroll(rq.ctx, n)
	if err != nil {
		return err
	}
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/nodes/"+created.UUID)
	return rq.reply(http.StatusCreated, rq.nodeView(created))
}
