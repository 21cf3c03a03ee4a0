package ironicapi

import (
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
)

// conductorFields are the fields of a conductor view; all exist from
// 1.49, when the endpoint appeared.
var conductorFields = map[string]int{
	"hostname": 1, "conductor_group": 1, "alive": 1, "drivers": 1, "links": 1, "created_at": 1, "updated_at": 1,
}

// conductorListFields are the fields of a listing without detail.
var conductorListFields = []string{"hostname", "conductor_group", "alive", "links"}

// conductorSortKeys are the conductor fields a listing sorts by ("alive"
// and "drivers" are refused, as Ironic does).
var conductorSortKeys = []string{"id", "hostname", "conductor_group", "created_at", "updated_at"}

func (h *Handler) conductorRoutes() {
	h.handle("GET /v1/conductors", route{minVersion: 49}, h.listConductors)
	h.handle("GET /v1/conductors/{hostname}", route{minVersion: 49}, h.getConductor)
}

// heartbeatTimeout is how recent a conductor's keepalive must be for the
// API to call it alive: Ironic's [conductor]heartbeat_timeout, the
// conductor package's default (the ring's own timeout is not exported).
const heartbeatTimeout = conductor.DefaultHeartbeatTimeout

// conductorView is a conductor as Ironic's API shows it: alive when
// online and kept alive within the heartbeat timeout.
func (rq *request) conductorView(c *baremetal.ConductorRecord, now time.Time) map[string]any {
	drivers := c.Drivers
	if drivers == nil {
		drivers = []string{}
	}
	return map[string]any{
		"hostname":        c.Hostname,
		"conductor_group": c.ConductorGroup,
		"alive":           c.Online && now.Sub(c.UpdatedAt) < heartbeatTimeout,
		"drivers":         drivers,
		"created_at":      timestamp(c.CreatedAt),
		"updated_at":      timestamp(c.UpdatedAt),
		"links":           rq.links("conductors", c.Hostname),
	}
}

// GET /v1/conductors (1.49)
func (h *Handler) listConductors(rq *request) error {
	q := rq.r.URL.Query()
	fields, err := rq.parseFields(conductorFields)
	if err != nil {
		return err
	}
	detail := false
	if s, ok := q["detail"]; ok {
		if detail, err = queryBool("detail", s[0]); err != nil {
			return err
		}
	}
	if fields != nil && detail {
		return badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	limit, sortKey, desc, err := rq.listPage()
	if err != nil {
		return err
	}
	if !slices.Contains(conductorSortKeys, sortKey) {
		return badRequest("The sort_key value %s is an invalid field for sorting", sortKey)
	}
	// The table holds one row per conductor process: small enough to
	// sort and page here.
	all, err := h.store.ListConductors(rq.ctx)
	if err != nil {
		return err
	}
	less := func(a, b *baremetal.ConductorRecord) bool {
		switch sortKey {
		case "hostname":
			return a.Hostname < b.Hostname
		case "conductor_group":
			return a.ConductorGroup < b.ConductorGroup
		case "created_at":
			return a.CreatedAt.Before(b.CreatedAt)
		case "updated_at":
			return a.UpdatedAt.Before(b.UpdatedAt)
		}
		return a.ID < b.ID
	}
	sort.SliceStable(all, func(i, j int) bool {
		if desc {
			return less(all[j], all[i]) || (!less(all[i], all[j]) && all[i].ID > all[j].ID)
		}
		return less(all[i], all[j]) || (!less(all[j], all[i]) && all[i].ID < all[j].ID)
	})
	if m := q.Get("marker"); m != "" {
		i := slices.IndexFunc(all, func(c *baremetal.ConductorRecord) bool { return c.Hostname == m })
		if i < 0 {
			return notFound("Conductor %s could not be found.", m)
		}
		all = all[i+1:]
	}
	page := all[:min(limit, len(all))]
	if fields == nil && !detail {
		fields = conductorListFields
	}
	now := time.Now()
	out := make([]map[string]any, 0, len(page))
	for _, c := range page {
		out = append(out, filterView(rq.conductorView(c, now), fields))
	}
	body := map[string]any{"conductors": out}
	if len(page) > 0 && len(page) == limit {
		body["next"] = rq.nextURL("conductors", page[len(page)-1].Hostname, limit)
	}
	return rq.reply(http.StatusOK, body)
}

// GET /v1/conductors/{hostname} (1.49)
func (h *Handler) getConductor(rq *request) error {
	fields, err := rq.parseFields(conductorFields)
	if err != nil {
		return err
	}
	host := rq.r.PathValue("hostname")
	if strings.TrimSpace(host) == "" {
		return badRequest("Missing host in hostname")
	}
	c, err := h.store.GetConductor(rq.ctx, host)
	if errors.Is(err, baremetal.ErrNotFound) {
		return notFound("Conductor %s could not be found.", host)
	}
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.conductorView(c, time.Now()), fields))
}
