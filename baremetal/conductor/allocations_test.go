package conductor_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// availableNode enrolls a node, sets it up with change and brings it to
// available.
func (h *harness) availableNode(name string, change func(n *baremetal.Node)) *baremetal.Node {
	h.t.Helper()
	n := h.enroll(name, nil)
	if change != nil {
		if _, err := h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { change(n); return nil }); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		h.t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	if err := h.c.Provide(h.ctx, n.UUID); err != nil {
		h.t.Fatal(err)
	}
	return h.waitFor(n.UUID, statemachine.Available)
}

// noneReserved fails the test when any node is still reserved.
func (h *harness) noneReserved() {
	h.t.Helper()
	nodes, err := h.store.ListNodes(h.ctx, baremetal.NodeFilter{Reserved: new(true)}, baremetal.Page{})
	if err != nil || len(nodes) != 0 {
		h.t.Fatalf("reserved nodes after the allocations: %d, %v; want none", len(nodes), err)
	}
}

func TestAllocationPicksMatchingNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{DisableAutomatedClean: true})
	gpu := h.availableNode("gpu", func(n *baremetal.Node) {
		n.ResourceClass, n.Traits, n.Owner = "large", []string{"CUSTOM_GPU", "CUSTOM_FAST"}, "project-a"
	})
	plain := h.availableNode("plain", func(n *baremetal.Node) { n.ResourceClass = "large" })
	leased := h.availableNode("leased", func(n *baremetal.Node) { n.ResourceClass, n.Lessee = "small", "project-b" })
	maint := h.availableNode("maint", func(n *baremetal.Node) { n.ResourceClass = "tiny" })
	if err := h.c.SetMaintenance(h.ctx, maint.UUID, true, "broken"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		a     baremetal.Allocation
		want  []string // the node may be any of these; none: error
		error string
	}{
		// The cases run in order; each success takes its node.
		{name: "missing trait", a: baremetal.Allocation{ResourceClass: "large", Traits: []string{"CUSTOM_NOPE"}}, error: "no suitable nodes have the requested traits CUSTOM_NOPE"},
		{name: "traits", a: baremetal.Allocation{ResourceClass: "large", Traits: []string{"CUSTOM_GPU"}}, want: []string{gpu.UUID}},
		{name: "owner", a: baremetal.Allocation{ResourceClass: "small", Owner: "project-b"}, want: []string{leased.UUID}},
		{name: "candidate by name", a: baremetal.Allocation{ResourceClass: "large", CandidateNodes: []string{plain.Name}}, want: []string{plain.UUID}},
		{name: "wrong owner", a: baremetal.Allocation{ResourceClass: "small", Owner: "project-z"}, error: "no available nodes match the resource class small"},
		{name: "no resource class match", a: baremetal.Allocation{ResourceClass: "huge"}, error: "no available nodes match the resource class huge"},
		{name: "maintenance", a: baremetal.Allocation{ResourceClass: "tiny"}, error: "no available nodes match the resource class tiny"},
		{name: "candidates elsewhere", a: baremetal.Allocation{ResourceClass: "small", CandidateNodes: []string{gpu.UUID}}, error: "none of the requested nodes are available and match the resource class small"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := h.c.CreateAllocation(h.ctx, &tc.a)
			if err != nil {
				t.Fatalf("CreateAllocation: %v", err)
			}
			stored, err := h.store.Allocations().Get(h.ctx, a.UUID)
			if err != nil || stored.State != a.State || stored.NodeUUID != a.NodeUUID {
				t.Fatalf("stored allocation = %+v, %v; returned %+v", stored, err, a)
			}
			if tc.want == nil {
				if a.State != baremetal.AllocationError || a.LastError != tc.error || a.NodeUUID != "" {
					t.Fatalf("allocation = state %s, node %q, last_error %q; want error %q", a.State, a.NodeUUID, a.LastError, tc.error)
				}
				return
			}
			if a.State != baremetal.AllocationActive || !slices.Contains(tc.want, a.NodeUUID) {
				t.Fatalf("allocation = state %s on node %q (%s); want active on one of %v", a.State, a.NodeUUID, a.LastError, tc.want)
			}
			n, err := h.store.GetNode(h.ctx, a.NodeUUID)
			if err != nil || n.InstanceUUID != a.UUID || n.AllocationUUID != a.UUID {
				t.Fatalf("allocated node: instance %q, allocation %q, %v; want both %s", n.InstanceUUID, n.AllocationUUID, err, a.UUID)
			}
			// The node is taken: the same request now fails.
			again, err := h.c.CreateAllocation(h.ctx, &baremetal.Allocation{ResourceClass: tc.a.ResourceClass, Traits: tc.a.Traits,
				Owner: tc.a.Owner, CandidateNodes: []string{a.NodeUUID}})
			if err != nil || again.State != baremetal.AllocationError {
				t.Fatalf("allocating a taken node = %+v, %v; want the error state", again, err)
			}
		})
	}
	h.noneReserved()
	for _, bad := range []*baremetal.Allocation{
		{ResourceClass: "large", CandidateNodes: []string{"no-such-node"}},
		{},
		{ResourceClass: "large", State: baremetal.AllocationActive},
	} {
		var ife *baremetal.InvalidFieldError
		if _, err := h.c.CreateAllocation(h.ctx, bad); !errors.As(err, &ife) {
			t.Errorf("CreateAllocation(%+v) = %v, want an InvalidFieldError", bad, err)
		}
	}
}

// TestConcurrentAllocationsTakeDistinctNodes races more allocations than
// there are nodes: every node goes to exactly one allocation, the others
// fail, and no node stays reserved.
func TestConcurrentAllocationsTakeDistinctNodes(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(fmt.Sprintf("postgres=%v", pg), func(t *testing.T) {
			store := openStore(t, pg)
			h := newHarness(t, store, fake.Config{}, conductor.Options{DisableAutomatedClean: true})
			const nodes, allocs = 3, 8
			for i := range nodes {
				h.availableNode(fmt.Sprintf("race-%d", i), func(n *baremetal.Node) { n.ResourceClass = "race" })
			}
			var wg sync.WaitGroup
			out := make([]*baremetal.Allocation, allocs)
			errs := make([]error, allocs)
			for i := range allocs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out[i], errs[i] = h.c.CreateAllocation(h.ctx, &baremetal.Allocation{ResourceClass: "race"})
				}()
			}
			wg.Wait()
			taken := map[string]string{}
			failed := 0
			for i, a := range out {
				if errs[i] != nil {
					t.Fatalf("CreateAllocation: %v", errs[i])
				}
				switch a.State {
				case baremetal.AllocationActive:
					if other, dup := taken[a.NodeUUID]; dup {
						t.Fatalf("node %s given to allocations %s and %s", a.NodeUUID, other, a.UUID)
					}
					taken[a.NodeUUID] = a.UUID
				case baremetal.AllocationError:
					failed++
				default:
					t.Fatalf("allocation left %s", a.State)
				}
			}
			if len(taken) != nodes || failed != allocs-nodes {
				t.Fatalf("%d nodes taken and %d allocations failed, want %d and %d", len(taken), failed, nodes, allocs-nodes)
			}
			for node, alloc := range taken {
				n, err := store.GetNode(h.ctx, node)
				if err != nil || n.AllocationUUID != alloc || n.InstanceUUID != alloc {
					t.Fatalf("node %s bound to %q/%q, want %s", node, n.AllocationUUID, n.InstanceUUID, alloc)
				}
			}
			h.noneReserved()
		})
	}
}

func TestAllocationBackfillAndDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{DisableAutomatedClean: true})
	deployed := h.availableNode("deployed", func(n *baremetal.Node) { n.ResourceClass, n.Traits = "large", []string{"CUSTOM_A"} })
	h.must(h.c.Deploy(h.ctx, deployed.UUID, conductor.DeployOptions{}))
	h.waitFor(deployed.UUID, statemachine.Active)
	idle := h.availableNode("idle", func(n *baremetal.Node) { n.ResourceClass = "large" })

	// A backfill needs an active node that matches.
	for _, tc := range []struct {
		name string
		a    baremetal.Allocation
		want string
	}{
		{"not active", baremetal.Allocation{NodeUUID: idle.Name}, `Node must be in the "active" state, but the current state is "available"`},
		{"resource class", baremetal.Allocation{NodeUUID: deployed.UUID, ResourceClass: "small"}, "Resource class large does not match the requested resource class small"},
		{"traits", baremetal.Allocation{NodeUUID: deployed.UUID, Traits: []string{"CUSTOM_B"}}, "does not match the requested traits"},
		{"candidates", baremetal.Allocation{NodeUUID: deployed.UUID, CandidateNodes: []string{idle.UUID}}, "Candidate nodes must be empty or contain the target node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.c.CreateAllocation(h.ctx, &tc.a)
			var af *conductor.AllocationFailedError
			if !errors.As(err, &af) || !errors.Is(err, conductor.ErrAllocationFailed) || !strings.Contains(af.Reason, tc.want) {
				t.Fatalf("backfill = %v, want AllocationFailedError containing %q", err, tc.want)
			}
			stored, err := h.store.Allocations().Get(h.ctx, af.Allocation)
			if err != nil || stored.State != baremetal.AllocationError || stored.LastError != af.Reason || stored.NodeUUID != "" {
				t.Fatalf("failed backfill stored as %+v, %v", stored, err)
			}
		})
	}
	b, err := h.c.CreateAllocation(h.ctx, &baremetal.Allocation{NodeUUID: deployed.Name, Name: "backfilled"})
	if err != nil || b.State != baremetal.AllocationActive || b.NodeUUID != deployed.UUID || b.ResourceClass != "large" {
		t.Fatalf("backfill = %+v, %v; want active on %s with the node's resource class", b, err, deployed.UUID)
	}
	if n, _ := h.store.GetNode(h.ctx, deployed.UUID); n.AllocationUUID != b.UUID || n.InstanceUUID != b.UUID {
		t.Fatalf("backfilled node bound to %q/%q", n.AllocationUUID, n.InstanceUUID)
	}

	// An active node keeps its allocation unless in maintenance.
	err = h.c.DeleteAllocation(h.ctx, "backfilled")
	if !errors.Is(err, conductor.ErrVerbRefused) || !strings.Contains(err.Error(), "the node is active") {
		t.Fatalf("DeleteAllocation(active node) = %v, want refused", err)
	}
	// Undeploying deletes the allocation, as Ironic's tear-down does.
	h.must(h.c.Undeploy(h.ctx, deployed.UUID))
	n := h.waitFor(deployed.UUID, statemachine.Available)
	if n.AllocationUUID != "" || n.InstanceUUID != "" {
		t.Fatalf("undeployed node still bound to %q/%q", n.AllocationUUID, n.InstanceUUID)
	}
	if _, err := h.store.Allocations().Get(h.ctx, b.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("allocation after undeploy = %v, want deleted", err)
	}

	// Deleting the allocation of an available node frees it.
	a, err := h.c.CreateAllocation(h.ctx, &baremetal.Allocation{ResourceClass: "large", CandidateNodes: []string{idle.UUID}})
	if err != nil || a.State != baremetal.AllocationActive {
		t.Fatalf("allocation = %+v, %v", a, err)
	}
	if err := h.c.DeleteAllocation(h.ctx, a.UUID); err != nil {
		t.Fatalf("DeleteAllocation: %v", err)
	}
	if n, _ := h.store.GetNode(h.ctx, idle.UUID); n.AllocationUUID != "" || n.InstanceUUID != "" {
		t.Fatalf("freed node still bound to %q/%q", n.AllocationUUID, n.InstanceUUID)
	}
	if err := h.c.DeleteAllocation(h.ctx, a.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("DeleteAllocation(again) = %v, want not found", err)
	}
	// A failed allocation has no node and deletes plainly.
	e, err := h.c.CreateAllocation(h.ctx, &baremetal.Allocation{ResourceClass: "none"})
	if err != nil || e.State != baremetal.AllocationError {
		t.Fatal(e, err)
	}
	if err := h.c.DeleteAllocation(h.ctx, e.UUID); err != nil {
		t.Fatalf("DeleteAllocation(failed) = %v", err)
	}
	h.noneReserved()
}

func TestCleanWithStoredRunbook(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{DisableAutomatedClean: true})
	rb := &baremetal.Runbook{Name: "CUSTOM_RESET", Traits: []string{"CUSTOM_RACK1", "CUSTOM_RESET"}, Steps: []baremetal.RunbookStep{
		{Interface: "bios", Step: "factory_reset", Args: map[string]any{}, Order: 2},
		{Interface: "bios", Step: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "a", "value": "b"}}}, Order: 1},
	}}
	if err := h.store.Runbooks().Create(h.ctx, rb); err != nil {
		t.Fatal(err)
	}
	n := h.enroll("runbook", nil)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)

	// Refused: the node lacks the runbook's trait; steps and a runbook.
	if err := h.c.Clean(h.ctx, n.UUID, nil, conductor.CleanOptions{Runbook: rb.Name}); !errors.Is(err, conductor.ErrVerbRefused) {
		t.Fatalf("Clean(runbook, no trait) = %v, want refused", err)
	}
	var ife *baremetal.InvalidFieldError
	err := h.c.Clean(h.ctx, n.UUID, []steps.Step{{Interface: "bios", Name: "factory_reset"}}, conductor.CleanOptions{Runbook: rb.Name})
	if !errors.As(err, &ife) || ife.Field != "runbook" {
		t.Fatalf("Clean(steps and runbook) = %v, want InvalidFieldError on runbook", err)
	}
	if err := h.c.Clean(h.ctx, n.UUID, nil, conductor.CleanOptions{Runbook: "CUSTOM_MISSING"}); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("Clean(unknown runbook) = %v, want not found", err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)

	// One shared trait is enough; by the rule before 1.112 the name must
	// be a trait.
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.Traits = []string{"CUSTOM_RACK1"}; return nil }))
	if err := h.c.Clean(h.ctx, n.UUID, nil, conductor.CleanOptions{Runbook: rb.UUID, RunbookByName: true}); !errors.Is(err, conductor.ErrVerbRefused) {
		t.Fatalf("Clean(runbook by name, name not a trait) = %v, want refused", err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	// A runbook without traits runs nowhere (1.112).
	bare := &baremetal.Runbook{Name: "no-traits", Steps: rb.Steps}
	if err := h.store.Runbooks().Create(h.ctx, bare); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Clean(h.ctx, n.UUID, nil, conductor.CleanOptions{Runbook: bare.Name}); !errors.Is(err, conductor.ErrVerbRefused) {
		t.Fatalf("Clean(runbook without traits) = %v, want refused", err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Clean(h.ctx, n.UUID, nil, conductor.CleanOptions{Runbook: rb.UUID}))
	h.waitFor(n.UUID, statemachine.Manageable)
	hist, err := h.store.ListHistory(h.ctx, n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, e := range hist {
		if s, ok := strings.CutPrefix(e.Event, "step_start "); ok {
			started = append(started, s)
		}
	}
	if want := []string{"bios.apply_configuration", "bios.factory_reset"}; !slices.Equal(started, want) {
		t.Fatalf("clean steps started %v, want the runbook's in order %v", started, want)
	}
}

// TestAllocationsResumeAtStart checks a conductor finishes, when it
// starts, the allocations it left allocating (a crash mid-way).
func TestAllocationsResumeAtStart(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{Hostname: "resume-host", DisableAutomatedClean: true})
	n := h.availableNode("resume", func(n *baremetal.Node) { n.ResourceClass = "resume" })
	rec, err := store.GetConductor(h.ctx, "resume-host")
	if err != nil {
		t.Fatal(err)
	}
	left := &baremetal.Allocation{ResourceClass: "resume", ConductorAffinity: rec.ID}
	other := &baremetal.Allocation{ResourceClass: "resume", ConductorAffinity: rec.ID + 1000}
	for _, a := range []*baremetal.Allocation{left, other} {
		if err := store.Allocations().Create(h.ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// The same conductor starting again (its row is reused).
	newHarness(t, store, fake.Config{}, conductor.Options{Hostname: "resume-host", DisableAutomatedClean: true})
	got, err := store.Allocations().Get(h.ctx, left.UUID)
	if err != nil || got.State != baremetal.AllocationActive || got.NodeUUID != n.UUID {
		t.Fatalf("left allocation after the restart = %+v, %v; want active on %s", got, err, n.UUID)
	}
	if got, _ := store.Allocations().Get(h.ctx, other.UUID); got.State != baremetal.AllocationAllocating {
		t.Fatalf("another conductor's allocation = %s, want it left allocating", got.State)
	}
}
