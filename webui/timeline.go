package webui

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"
)

// Timeline bounds.
const (
	// timelineEntries bounds the history entries, newest first, one
	// timeline is built from.
	timelineEntries = 4000
	// timelinePage is how many entries one store read takes.
	timelinePage = 500
	// DefaultTimelinePhases is how many of the newest phases a timeline
	// shows unless ?phases says otherwise (at most 50).
	DefaultTimelinePhases = 6
)

// Timeline is where a node's time went: its provisioning phases, oldest
// first, each a set of lanes of bars on one time axis. Times are
// milliseconds since the epoch.
type Timeline struct {
	Node   string  `json:"node"`
	Now    float64 `json:"now"`
	Phases []Phase `json:"phases"`
}

// Phase is one run of the node from a state it rests in (a stable or a
// failure state) to the next: a
// manage, clean, deploy, undeploy, inspect, rescue, service or adopt.
type Phase struct {
	// Name is the operation ("deploy"), from the first state of the run.
	Name  string  `json:"name"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Open is set while the run goes on; End is then the timeline's Now.
	Open bool `json:"open,omitempty"`
	// Result is the stable state the run ended in.
	Result string `json:"result,omitempty"`
	// Failed is set when it ended in a failure state.
	Failed bool   `json:"failed,omitempty"`
	Lanes  []Lane `json:"lanes"`
}

// Lane is one row of a phase: "state" (the provision states, waits
// marked as waits), "boot" (network boot stages), "steps", "agent" (the
// agent's heartbeats) and "events" (warnings and errors).
type Lane struct {
	Name string `json:"name"`
	Bars []Bar  `json:"bars"`
}

// Bar is a span of a lane, or an instant when End equals Start.
type Bar struct {
	Label string `json:"label"`
	// Kind is "state", "wait", "stage", "step", "heartbeat" or "event".
	Kind   string  `json:"kind"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	Failed bool    `json:"failed,omitempty"`
	Detail string  `json:"detail,omitempty"`
}

// The lanes, in the order a phase lists them.
var laneNames = []string{"state", "boot", "steps", "agent", "events"}

// operation names a phase by the first state of its run.
func operation(s statemachine.State) string {
	switch s {
	case statemachine.Verifying:
		return "manage"
	case statemachine.Cleaning, statemachine.CleanWait:
		return "clean"
	case statemachine.Deploying, statemachine.DeployWait:
		return "deploy"
	case statemachine.Deleting:
		return "undeploy"
	case statemachine.Inspecting, statemachine.InspectWait:
		return "inspect"
	case statemachine.Rescuing, statemachine.RescueWait:
		return "rescue"
	case statemachine.Unrescuing:
		return "unrescue"
	case statemachine.Adopting:
		return "adopt"
	case statemachine.Servicing, statemachine.ServiceWait:
		return "service"
	}
	return string(s)
}

func isWait(s statemachine.State) bool {
	switch s {
	case statemachine.DeployWait, statemachine.CleanWait, statemachine.InspectWait, statemachine.RescueWait, statemachine.ServiceWait:
		return true
	}
	return false
}

// phaseBuilder collects one phase's bars.
type phaseBuilder struct {
	p     Phase
	lanes map[string][]Bar
	// state is the index of the open state bar, -1 when none.
	state int
	// steps maps a running step to its bar's index.
	steps map[string]int
}

func newPhase(name string, at float64) *phaseBuilder {
	return &phaseBuilder{p: Phase{Name: name, Start: at}, lanes: map[string][]Bar{}, state: -1, steps: map[string]int{}}
}

func (b *phaseBuilder) add(lane string, bar Bar) int {
	b.lanes[lane] = append(b.lanes[lane], bar)
	return len(b.lanes[lane]) - 1
}

func (b *phaseBuilder) closeState(at float64) {
	if b.state >= 0 {
		b.lanes["state"][b.state].End = at
		b.state = -1
	}
}

// finish ends the phase at end, closing what is still open, and derives
// the spans of boot stages and heartbeats: each lasts until the next one
// of its boot (a new boot starts at "boot prepared").
func (b *phaseBuilder) finish(end float64) Phase {
	b.closeState(end)
	for _, i := range b.steps {
		b.lanes["steps"][i].End = end
	}
	boot := b.lanes["boot"]
	for i := range boot {
		if i+1 < len(boot) && boot[i+1].Label != string(stage.Prepared) && boot[i].Label != string(stage.AgentHeartbeat) {
			boot[i].End = boot[i+1].Start
		}
	}
	agent := b.lanes["agent"]
	for i := range agent {
		if i+1 < len(agent) {
			agent[i].End = agent[i+1].Start
		}
	}
	b.p.End = end
	for _, name := range laneNames {
		bars := b.lanes[name]
		if bars == nil {
			bars = []Bar{}
		}
		b.p.Lanes = append(b.p.Lanes, Lane{Name: name, Bars: bars})
	}
	return b.p
}

// BuildTimeline builds the timeline of a node from its history entries,
// oldest first (by creation time), as of now. A phase starts with a
// transition out of a stable state and ends with the transition into the
// next one. Entries outside every phase are not drawn (the history lists
// them), but for the rest of the last phase's boot: its stages that come
// after the phase ended (an agent's lookup after in-band inspection with
// fast track races the transition to manageable) are drawn in that phase,
// past its end, until a new boot is prepared or a phase begins.
func BuildTimeline(node string, entries []*baremetal.HistoryEntry, now time.Time) Timeline {
	tl := Timeline{Node: node, Now: millis(now), Phases: []Phase{}}
	var cur *phaseBuilder
	// trailing is set while the last phase's boot may go on.
	trailing := false
	for _, e := range entries {
		at := millis(e.CreatedAt)
		failed := e.Severity == baremetal.HistoryError
		switch {
		case e.EventType == "provisioning" && strings.HasPrefix(e.Event, "provision state "):
			to := statemachine.State(strings.TrimPrefix(e.Event, "provision state "))
			// A run ends in a stable state or a failure state (Ironic's
			// failure states are not all stable: deploy failed is not).
			rests := statemachine.IsStable(to) || statemachine.IsFailure(to)
			if cur == nil {
				if rests {
					continue
				}
				cur = newPhase(operation(to), at)
				trailing = false
			}
			cur.closeState(at)
			if rests {
				cur.p.Result = string(to)
				cur.p.Failed = failed || statemachine.IsFailure(to)
				if cur.p.Failed {
					cur.add("events", Bar{Label: string(to), Kind: "event", Start: at, End: at, Failed: true, Detail: e.Message})
				}
				tl.Phases = append(tl.Phases, cur.finish(at))
				cur = nil
				trailing = true
				continue
			}
			kind := "state"
			if isWait(to) {
				kind = "wait"
			}
			cur.state = cur.add("state", Bar{Label: string(to), Kind: kind, Start: at, End: at, Failed: failed, Detail: e.Message})
		case cur == nil:
			if trailing && e.EventType == stage.EventType {
				trailing = e.Event != string(stage.Prepared) && trailBoot(&tl.Phases[len(tl.Phases)-1], e, at)
			}
		case e.EventType == stage.EventType:
			cur.add("boot", Bar{Label: e.Event, Kind: "stage", Start: at, End: at, Failed: e.Severity != baremetal.HistoryInfo, Detail: e.Message})
			if e.Event == string(stage.AgentHeartbeat) {
				cur.add("agent", Bar{Label: "heartbeat", Kind: "heartbeat", Start: at, End: at, Detail: e.Message})
			}
		case e.EventType == "agent" && e.Event == "agent heartbeat":
			cur.add("agent", Bar{Label: "heartbeat", Kind: "heartbeat", Start: at, End: at, Detail: e.Message})
		case strings.HasPrefix(e.Event, "step_start "):
			key := e.EventType + " " + strings.TrimPrefix(e.Event, "step_start ")
			cur.steps[key] = cur.add("steps", Bar{Label: strings.TrimPrefix(e.Event, "step_start "), Kind: "step", Start: at, End: at, Detail: e.Message})
		case strings.HasPrefix(e.Event, "step_end "):
			key := e.EventType + " " + strings.TrimPrefix(e.Event, "step_end ")
			if i, ok := cur.steps[key]; ok {
				bar := &cur.lanes["steps"][i]
				bar.End, bar.Failed, bar.Detail = at, failed, e.Message
				delete(cur.steps, key)
			} else {
				cur.add("steps", Bar{Label: strings.TrimPrefix(e.Event, "step_end "), Kind: "step", Start: at, End: at, Failed: failed, Detail: e.Message})
			}
		case e.Severity != baremetal.HistoryInfo:
			cur.add("events", Bar{Label: e.Event, Kind: "event", Start: at, End: at, Failed: failed, Detail: e.Message})
		}
	}
	if cur != nil {
		cur.p.Open = true
		tl.Phases = append(tl.Phases, cur.finish(max(tl.Now, cur.p.Start)))
	}
	return tl
}

// trailBoot draws boot stage e, at time at, in the finished phase p if
// p booted; it reports whether it did.
func trailBoot(p *Phase, e *baremetal.HistoryEntry, at float64) bool {
	var boot, agent *Lane
	for i := range p.Lanes {
		switch p.Lanes[i].Name {
		case "boot":
			boot = &p.Lanes[i]
		case "agent":
			agent = &p.Lanes[i]
		}
	}
	if boot == nil || len(boot.Bars) == 0 {
		return false
	}
	if prev := &boot.Bars[len(boot.Bars)-1]; prev.Label != string(stage.AgentHeartbeat) {
		prev.End = at
	}
	boot.Bars = append(boot.Bars, Bar{Label: e.Event, Kind: "stage", Start: at, End: at, Failed: e.Severity != baremetal.HistoryInfo, Detail: e.Message})
	if e.Event == string(stage.AgentHeartbeat) && agent != nil {
		if len(agent.Bars) > 0 {
			agent.Bars[len(agent.Bars)-1].End = at
		}
		agent.Bars = append(agent.Bars, Bar{Label: "heartbeat", Kind: "heartbeat", Start: at, End: at, Detail: e.Message})
	}
	return true
}

// timeline is GET {prefix}/api/nodes/{node}/timeline[?phases=N]: the
// node's newest phases, built from at most timelineEntries history
// entries read newest first, a page at a time, from the store.
func (h *Handler) timeline(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	n, err := h.store.GetNode(ctx, r.PathValue("node"))
	if err != nil {
		h.fail(w, err)
		return
	}
	keep := DefaultTimelinePhases
	if s := r.URL.Query().Get("phases"); s != "" {
		v, err := parseSmallInt(s, 1, 50)
		if err != nil {
			http.Error(w, "phases: "+err.Error(), http.StatusBadRequest)
			return
		}
		keep = v
	}
	var entries []*baremetal.HistoryEntry
	page := baremetal.HistoryPage{Descending: true, Limit: timelinePage}
	for len(entries) < timelineEntries {
		got, err := h.store.PageHistory(ctx, n.UUID, page)
		if err != nil {
			h.fail(w, err)
			return
		}
		entries = append(entries, got...)
		if len(got) < timelinePage {
			break
		}
		page.After = got[len(got)-1].ID
	}
	slices.Reverse(entries)
	tl := BuildTimeline(n.UUID, entries, time.Now())
	if len(tl.Phases) > keep {
		tl.Phases = tl.Phases[len(tl.Phases)-keep:]
	}
	writeJSON(w, tl)
}
