package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
)

// Fleet snapshot and stream bounds.
const (
	// snapshotPage is how many nodes one store read of the snapshot
	// takes.
	snapshotPage = 1000
	// streamBatch bounds the events written in one message.
	streamBatch = 512
	// streamKeepalive paces the comment lines that keep an idle stream
	// (and the proxies on its way) open.
	streamKeepalive = 15 * time.Second
	// streamWriteTimeout bounds one write to a browser; one that stops
	// reading is dropped.
	streamWriteTimeout = 30 * time.Second
)

// Row is one node as the fleet page shows it. A snapshot sends whole
// rows; the stream sends patches, rows with only the fields that changed
// set (and UUID).
type Row struct {
	UUID           string  `json:"uuid"`
	Name           *string `json:"name,omitempty"`
	ProvisionState *string `json:"provision_state,omitempty"`
	Target         *string `json:"target_provision_state,omitempty"`
	PowerState     *string `json:"power_state,omitempty"`
	Maintenance    *bool   `json:"maintenance,omitempty"`
	Health         *string `json:"health,omitempty"`
	Conductor      *string `json:"conductor,omitempty"`
	LastError      *string `json:"last_error,omitempty"`
	// Activity is what the node does now: the running step or the last
	// boot stage ("deploy.write_image", "boot: kernel").
	Activity *string `json:"activity,omitempty"`
	// Deleted is set in the patch of a node removed from the store.
	Deleted bool `json:"deleted,omitempty"`
	// At is when the row's data was read or the change happened
	// (milliseconds since the epoch).
	At float64 `json:"at"`
}

func ptr[T any](v T) *T { return &v }

// rowOf is n's whole row.
func (h *Handler) rowOf(n *baremetal.Node, at time.Time) Row {
	owner, err := h.c.OwnerOfNode(n)
	if err != nil {
		owner = ""
	}
	activity := ""
	for _, s := range []map[string]any{n.DeployStep, n.CleanStep, n.ServiceStep} {
		if iface, _ := s["interface"].(string); iface != "" {
			step, _ := s["step"].(string)
			activity = iface + "." + step
		}
	}
	return Row{UUID: n.UUID, Name: ptr(n.Name), ProvisionState: ptr(string(n.ProvisionState)), Target: ptr(string(n.TargetProvisionState)),
		PowerState: ptr(string(n.PowerState)), Maintenance: ptr(n.Maintenance), Health: ptr(n.Health), Conductor: ptr(owner),
		LastError: ptr(n.LastError), Activity: ptr(activity), At: millis(at)}
}

// snapshot is GET {prefix}/api/fleet.
type snapshot struct {
	Conductor string  `json:"conductor"`
	At        float64 `json:"at"`
	Nodes     []Row   `json:"nodes"`
}

// fleet answers every node's row, read from the store a page at a time.
func (h *Handler) fleet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	out := snapshot{Conductor: h.c.Hostname(), At: millis(time.Now())}
	marker := ""
	for {
		page, err := h.store.ListNodes(ctx, baremetal.NodeFilter{}, baremetal.Page{Limit: snapshotPage, Marker: marker})
		if err != nil {
			h.fail(w, err)
			return
		}
		now := time.Now()
		for _, n := range page {
			out.Nodes = append(out.Nodes, h.rowOf(n, now))
		}
		if len(page) < snapshotPage {
			break
		}
		marker = page[len(page)-1].UUID
	}
	if out.Nodes == nil {
		out.Nodes = []Row{}
	}
	writeJSON(w, out)
}

// patchOf turns a conductor event into the row fields it changed. ok is
// false for an event that says too little (maintenance, a new node, a
// console change): its node is read again.
func patchOf(e *conductor.Event) (p Row, ok bool) {
	p = Row{UUID: e.NodeUUID, At: millis(e.Time)}
	if e.Conductor != "" {
		p.Conductor = ptr(e.Conductor)
	}
	switch e.Type {
	case conductor.EventTransition:
		p.ProvisionState, p.Target = ptr(string(e.To)), ptr(string(e.Target))
		switch {
		case e.Error != "":
			p.LastError = ptr(e.Error)
		case !statemachine.IsInternalEvent(e.Trigger):
			// A verb starts new work: the conductor clears last_error.
			p.LastError = ptr("")
		}
		if statemachine.IsStable(e.To) {
			p.Activity = ptr("")
		}
	case conductor.EventPower:
		p.PowerState = ptr(string(e.PowerState))
	case conductor.EventStepStart:
		p.Activity = ptr(e.Step)
	case conductor.EventStepEnd:
		p.Activity = ptr("")
		if e.Error != "" {
			p.LastError = ptr(e.Error)
		}
	case conductor.EventBootStage:
		p.Activity = ptr("boot: " + string(e.BootStage))
	case conductor.EventNodeDeleted:
		p.Deleted = true
	default:
		return p, false
	}
	return p, true
}

// events streams the fleet's changes as server-sent events: each message
// ("data:") is a JSON list of patches (Row); a "resync" event tells the
// page to fetch the snapshot again because the stream dropped events for
// a slow reader. ?node=UUID restricts the stream to one node.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	select {
	case h.streams <- struct{}{}:
		defer func() { <-h.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many live streams; retry later", http.StatusServiceUnavailable)
		return
	}
	var f conductor.WatchFilter
	if node := r.URL.Query().Get("node"); node != "" {
		n, err := h.store.GetNode(r.Context(), node)
		if err != nil {
			h.fail(w, err)
			return
		}
		f.Nodes = []string{n.UUID}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch := h.c.Watch(ctx, f)
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		buf.Reset()
		return rc.Flush() == nil
	}
	buf.WriteString(": anvil fleet stream\nretry: 2000\n\n")
	if !send() {
		return
	}
	keepalive := time.NewTicker(streamKeepalive)
	defer keepalive.Stop()
	for {
		var first conductor.Event
		var open bool
		select {
		case <-ctx.Done():
			return
		case <-keepalive.C:
			buf.WriteString(": keepalive\n\n")
			if !send() {
				return
			}
			continue
		case first, open = <-ch:
			if !open {
				return
			}
		}
		batch := []conductor.Event{first}
	drain:
		for len(batch) < streamBatch {
			select {
			case e, open := <-ch:
				if !open {
					break drain
				}
				batch = append(batch, e)
			default:
				break drain
			}
		}
		patches := make([]Row, 0, len(batch))
		resync := false
		for i := range batch {
			e := &batch[i]
			if e.Dropped > 0 {
				resync = true
			}
			p, ok := patchOf(e)
			if !ok {
				n, err := h.store.GetNode(ctx, e.NodeUUID)
				if err != nil {
					continue
				}
				p = h.rowOf(n, e.Time)
			}
			patches = append(patches, p)
		}
		if resync {
			buf.WriteString("event: resync\ndata: {}\n\n")
		}
		if len(patches) > 0 {
			b, err := json.Marshal(patches)
			if err != nil {
				return
			}
			buf.WriteString("data: ")
			buf.Write(b)
			buf.WriteString("\n\n")
		}
		if !send() {
			return
		}
	}
}
