package conductor_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
	"github.com/prometheus/client_golang/prometheus"
)

// limitVerb is one verb subject to a concurrency limit.
type limitVerb struct {
	name string
	// start is the state the node is put in before the verb.
	start statemachine.State
	// ends is where an accepted verb takes the node.
	ends statemachine.State
	// option is the limit the verb is counted against.
	option string
	// counted are the busy states its limit counts; other is a busy
	// state of the other limit, which must not count.
	counted []statemachine.State
	other   statemachine.State
	call    func(h *harness, uuid string) error
}

func limitVerbs() []limitVerb {
	deploying := []statemachine.State{statemachine.Deploying, statemachine.DeployWait}
	cleaning := []statemachine.State{statemachine.Deleting, statemachine.Cleaning, statemachine.CleanWait}
	return []limitVerb{
		{"deploy", statemachine.Available, statemachine.Active, "max_concurrent_deploy", deploying, statemachine.CleanWait,
			func(h *harness, u string) error { return h.c.Deploy(h.ctx, u, conductor.DeployOptions{}) }},
		{"rebuild", statemachine.Active, statemachine.Active, "max_concurrent_deploy", deploying, statemachine.Cleaning,
			func(h *harness, u string) error { return h.c.Rebuild(h.ctx, u, conductor.DeployOptions{}) }},
		{"undeploy", statemachine.Active, statemachine.Available, "max_concurrent_clean", cleaning, statemachine.DeployWait,
			func(h *harness, u string) error { return h.c.Undeploy(h.ctx, u) }},
		{"provide", statemachine.Manageable, statemachine.Available, "max_concurrent_clean", cleaning, statemachine.Deploying,
			func(h *harness, u string) error { return h.c.Provide(h.ctx, u) }},
		{"clean", statemachine.Manageable, statemachine.Manageable, "max_concurrent_clean", cleaning, statemachine.DeployWait,
			func(h *harness, u string) error {
				return h.c.Clean(h.ctx, u, []steps.Step{{Interface: "bios", Name: "factory_reset"}}, conductor.CleanOptions{})
			}},
	}
}

// TestConcurrentActionLimit runs every limited verb under, at and over its
// limit, with the limit applied globally and per conductor group, with
// Ironic's defaults and without a limit. A refused verb changes nothing,
// leaves the node unlocked and is counted as refused; an accepted one runs
// to its end.
func TestConcurrentActionLimit(t *testing.T) {
	t.Parallel()
	const group, otherGroup = "rack-a", "rack-b"
	for _, v := range limitVerbs() {
		defaultLimit := conductor.DefaultMaxConcurrentClean
		if v.option == "max_concurrent_deploy" {
			defaultLimit = conductor.DefaultMaxConcurrentDeploy
		}
		for _, tc := range []struct {
			name string
			// limit is set as MaxConcurrentDeploy or MaxConcurrentClean
			// (the verb's); the other limit is set to 1, which the busy
			// nodes of the other kind exceed without effect.
			limit    int
			perGroup bool
			// busy nodes in the counted states, in the node's group and
			// in another group; three nodes in the other limit's state
			// are always there.
			busy, busyOther int
			// wantCount is the count a refusal reports; 0 means accepted.
			wantCount, wantLimit int
		}{
			{name: "under limit", limit: 3, busy: 2},
			{name: "at limit", limit: 3, busy: 3, wantCount: 3, wantLimit: 3},
			{name: "over limit", limit: 2, busy: 4, wantCount: 4, wantLimit: 2},
			{name: "global counts every group", limit: 2, busy: 1, busyOther: 1, wantCount: 2, wantLimit: 2},
			{name: "per group ignores other groups", limit: 2, perGroup: true, busy: 1, busyOther: 5},
			{name: "per group at limit", limit: 2, perGroup: true, busy: 2, busyOther: 5, wantCount: 2, wantLimit: 2},
			{name: "unlimited", limit: -1, busy: defaultLimit + 5},
			{name: "default under limit", limit: 0, busy: defaultLimit - 1},
			{name: "default at limit", limit: 0, busy: defaultLimit, wantCount: defaultLimit, wantLimit: defaultLimit},
		} {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				opts := conductor.Options{Hostname: "limit-host", ConductorGroup: group,
					MaxConcurrentPerConductorGroup: tc.perGroup, MaxConcurrentDeploy: 1, MaxConcurrentClean: 1}
				if v.option == "max_concurrent_deploy" {
					opts.MaxConcurrentDeploy = tc.limit
				} else {
					opts.MaxConcurrentClean = tc.limit
				}
				store := openStore(t, false)
				h := newHarness(t, store, fake.Config{}, opts)
				reg := prometheus.NewPedanticRegistry()
				if err := reg.Register(h.c.Metrics()); err != nil {
					t.Fatal(err)
				}
				var busy []*baremetal.Node
				add := func(k int, g string, states []statemachine.State) {
					for i := 0; i < k; i++ {
						st := states[i%len(states)]
						busy = append(busy, &baremetal.Node{Name: uniqueName(fmt.Sprintf("busy-%s-%d", g, len(busy))),
							Driver: builtin.FakeHardware, ConductorGroup: g, ProvisionState: st, TargetProvisionState: "active"})
					}
				}
				add(tc.busy, group, v.counted)
				add(tc.busyOther, otherGroup, v.counted)
				add(3, group, []statemachine.State{v.other})
				if err := store.CreateNodes(h.ctx, busy); err != nil {
					t.Fatal(err)
				}

				n := h.enrollIn(v.name, group, v.start)
				before, err := store.GetNode(h.ctx, n.UUID)
				if err != nil {
					t.Fatal(err)
				}
				err = v.call(h, n.UUID)
				if tc.wantCount == 0 {
					if err != nil {
						t.Fatalf("%s with %d busy nodes (limit %d): %v", v.name, tc.busy, tc.limit, err)
					}
					h.waitFor(n.UUID, v.ends)
					if got := metricValue(t, reg, "anvil_conductor_verbs_total", map[string]string{"verb": v.name, "outcome": "accepted"}); got != 1 {
						t.Errorf("verbs_total{%s,accepted} = %v, want 1", v.name, got)
					}
					return
				}
				var le *conductor.ConcurrentActionLimitError
				if !errors.As(err, &le) || !errors.Is(err, conductor.ErrConcurrentActionLimit) {
					t.Fatalf("%s at the limit: err = %v, want a *ConcurrentActionLimitError", v.name, err)
				}
				if want := "unable to initiate " + v.name + " due to concurrent action limit"; !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
				if errors.Is(err, conductor.ErrVerbRefused) || errors.Is(err, statemachine.ErrInvalidTransition) {
					t.Errorf("limit error %v also matches a permanent refusal", err)
				}
				wantStates := make([]string, len(v.counted))
				for i, s := range v.counted {
					wantStates[i] = string(s)
				}
				if le.Node != n.UUID || le.Action != v.name || le.Option != v.option || le.Limit != tc.wantLimit ||
					le.Count != tc.wantCount || !slices.Equal(le.States, wantStates) || le.PerConductorGroup != tc.perGroup || le.ConductorGroup != group {
					t.Errorf("error = %+v, want node %s, action %s, option %s, limit %d, count %d, states %v, per group %t in %s",
						*le, n.UUID, v.name, v.option, tc.wantLimit, tc.wantCount, wantStates, tc.perGroup, group)
				}
				after, err := store.GetNode(h.ctx, n.UUID)
				if err != nil {
					t.Fatal(err)
				}
				if after.Version != before.Version || after.ProvisionState != v.start || after.TargetProvisionState != "" ||
					after.Reservation != "" || after.DriverInternalInfo["anvil_intent"] != nil {
					t.Errorf("refused %s changed the node: version %d -> %d, state %s (target %q), reservation %q, intent %v",
						v.name, before.Version, after.Version, after.ProvisionState, after.TargetProvisionState, after.Reservation, after.DriverInternalInfo["anvil_intent"])
				}
				if got := metricValue(t, reg, "anvil_conductor_verbs_total", map[string]string{"verb": v.name, "outcome": "refused"}); got != 1 {
					t.Errorf("verbs_total{%s,refused} = %v, want 1", v.name, got)
				}
			})
		}
	}
}

// TestConcurrentActionLimitCheckedAfterTransition: a verb the state
// machine refuses reports the invalid transition, not the limit, as
// Ironic's API checks the transition before the conductor counts.
func TestConcurrentActionLimitCheckedAfterTransition(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{MaxConcurrentDeploy: 1})
	if err := store.CreateNode(h.ctx, &baremetal.Node{Name: uniqueName("busy"), Driver: builtin.FakeHardware, ProvisionState: statemachine.Deploying}); err != nil {
		t.Fatal(err)
	}
	n := h.enrollIn("enrolled", "", statemachine.Enroll)
	err := h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{})
	if !errors.Is(err, statemachine.ErrInvalidTransition) || errors.Is(err, conductor.ErrConcurrentActionLimit) {
		t.Fatalf("Deploy from enroll at the limit: %v, want the invalid transition", err)
	}
}

// TestConcurrentActionLimitFreesUp: once a counted node leaves the counted
// states, the refused verb is accepted on retry.
func TestConcurrentActionLimitFreesUp(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{MaxConcurrentClean: 1})
	first := h.enrollIn("first", "", statemachine.Manageable)
	second := h.enrollIn("second", "", statemachine.Manageable)
	// first waits in clean wait, as an agent-based clean waiting for its
	// agent does.
	first.ProvisionState, first.TargetProvisionState = statemachine.CleanWait, statemachine.Available
	if err := store.UpdateNode(h.ctx, first, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Provide(h.ctx, second.UUID); !errors.Is(err, conductor.ErrConcurrentActionLimit) {
		t.Fatalf("Provide with a node in clean wait and max_concurrent_clean 1: %v", err)
	}
	first.ProvisionState, first.TargetProvisionState = statemachine.Manageable, ""
	if err := store.UpdateNode(h.ctx, first, ""); err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Provide(h.ctx, second.UUID))
	h.waitFor(second.UUID, statemachine.Available)
}

// enrollIn enrolls a fake node in conductor group g and writes state as
// its provision state (a stable state the verbs start from).
func (h *harness) enrollIn(name, g string, state statemachine.State) *baremetal.Node {
	h.t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware, ConductorGroup: g})
	if err != nil {
		h.t.Fatalf("Enroll: %v", err)
	}
	if state == statemachine.Enroll {
		return n
	}
	n.ProvisionState = state
	if err := h.store.UpdateNode(h.ctx, n, ""); err != nil {
		h.t.Fatalf("set node %s to %s: %v", n.UUID, state, err)
	}
	return n
}
