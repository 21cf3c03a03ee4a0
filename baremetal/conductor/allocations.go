package conductor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
)

// ErrAllocationFailed: an allocation found no node, or a backfill's node
// does not match it. The allocation is stored in the error state.
var ErrAllocationFailed = errors.New("conductor: allocation failed")

// AllocationFailedError says why an allocation ended in the error state,
// as Ironic's AllocationFailed. It matches ErrAllocationFailed.
type AllocationFailedError struct {
	// Allocation is the allocation's UUID.
	Allocation string
	// Reason is the allocation's last_error.
	Reason string
}

func (e *AllocationFailedError) Error() string {
	return fmt.Sprintf("failed to process allocation %s: %s", e.Allocation, e.Reason)
}

// Is reports whether target is ErrAllocationFailed.
func (e *AllocationFailedError) Is(target error) bool { return target == ErrAllocationFailed }

// CreateAllocation stores a new allocation and processes it at once, as
// Ironic's conductor does (conductor/allocations.py), so the returned
// allocation is active or in error, never allocating:
//
//   - Without NodeUUID it picks, in random order (a node whose name is
//     the allocation's name first), an available node that is not in
//     maintenance, has a power state and no instance, has the resource
//     class, every trait of Traits, is one of CandidateNodes when given
//     and is owned or leased by Owner when given. Under the node's lock
//     it checks the node again, binds the allocation (its node_uuid; the
//     store's unique allocations.node_id makes that the claim, so two
//     allocations never take one node) and sets the node's
//     AllocationUUID and InstanceUUID to the allocation's UUID. Locked
//     nodes are skipped and retried per the lock policy. With no node
//     found the allocation is stored in error with last_error set, and
//     returned with a nil error: the failure is the allocation's state.
//   - With NodeUUID (a UUID or name) it is a backfill of an existing
//     deployment (API 1.58): the node must be active and match the
//     resource class (when given; it is copied from the node otherwise),
//     the traits and the candidates, and have no other instance or
//     allocation. A mismatch stores the allocation in error and returns
//     an *AllocationFailedError.
//
// Candidate names are resolved to UUIDs before the allocation is stored.
// Errors before storing: *baremetal.InvalidFieldError,
// *baremetal.DuplicateError, *baremetal.NotFoundError (the backfill's
// node).
func (c *Conductor) CreateAllocation(ctx context.Context, a *baremetal.Allocation) (*baremetal.Allocation, error) {
	a, backfill, err := c.storeAllocation(ctx, a)
	if err != nil {
		return nil, err
	}
	if backfill != "" {
		return c.backfill(ctx, a, backfill)
	}
	return c.allocate(ctx, a)
}

// StartAllocation is CreateAllocation as Ironic's API does it: the
// allocation is checked and stored in the allocating state and returned
// at once; the conductor processes it in the background (Ironic's
// create_allocation spawns do_allocate), the outcome landing in its state
// (active or error) and last_error. A backfill (NodeUUID set) is quick
// and done before returning, as Ironic does it, with CreateAllocation's
// result. The errors are CreateAllocation's, and ErrConductorNotRunning
// when the conductor is not running (nothing is stored then). Processing
// stops with the conductor; an allocation left allocating is resumed at
// the next start.
func (c *Conductor) StartAllocation(ctx context.Context, a *baremetal.Allocation) (*baremetal.Allocation, error) {
	c.mu.Lock()
	running := c.state == lifecycleRunning
	if running {
		c.loops.Add(1)
	}
	bg := c.bg
	c.mu.Unlock()
	if !running {
		return nil, ErrConductorNotRunning
	}
	stored, backfill, err := c.storeAllocation(ctx, a)
	if err != nil {
		c.loops.Done()
		return nil, err
	}
	if backfill != "" {
		defer c.loops.Done()
		return c.backfill(ctx, stored, backfill)
	}
	work := stored.Clone()
	go func() {
		defer c.loops.Done()
		if _, err := c.allocate(bg, work); err != nil && bg.Err() == nil {
			c.log.Warn("allocation not processed", "allocation", work.UUID, "error", err)
		}
	}()
	return stored, nil
}

// storeAllocation checks a and stores it in the allocating state. It
// returns the stored copy and, for a backfill, the node's UUID.
func (c *Conductor) storeAllocation(ctx context.Context, a *baremetal.Allocation) (*baremetal.Allocation, string, error) {
	if a == nil {
		return nil, "", &baremetal.InvalidFieldError{Kind: "allocation", Field: "allocation", Expected: "an allocation"}
	}
	a = a.Clone()
	if a.State != "" && a.State != baremetal.AllocationAllocating {
		return nil, "", &baremetal.InvalidFieldError{Kind: "allocation", Ident: a.UUID, Field: "state", Expected: "empty for a new allocation"}
	}
	if a.LastError != "" {
		return nil, "", &baremetal.InvalidFieldError{Kind: "allocation", Ident: a.UUID, Field: "last_error", Expected: "empty for a new allocation"}
	}
	var backfill *baremetal.Node
	if a.NodeUUID != "" {
		n, err := c.store.GetNode(ctx, a.NodeUUID)
		if err != nil {
			return nil, "", err
		}
		backfill = n
		if a.ResourceClass == "" {
			a.ResourceClass = n.ResourceClass
		}
		a.NodeUUID = ""
	}
	for i, cand := range a.CandidateNodes {
		n, err := c.store.GetNode(ctx, cand)
		if errors.Is(err, baremetal.ErrNotFound) {
			return nil, "", &baremetal.InvalidFieldError{Kind: "allocation", Ident: a.UUID, Field: "candidate_nodes",
				Expected: fmt.Sprintf("existing nodes (UUIDs or names); candidate %d, %q, is not one", i, cand)}
		}
		if err != nil {
			return nil, "", err
		}
		a.CandidateNodes[i] = n.UUID
	}
	if backfill == nil && a.ResourceClass == "" {
		return nil, "", &baremetal.InvalidFieldError{Kind: "allocation", Ident: a.UUID, Field: "resource_class", Expected: "a resource class (required unless a node is given)"}
	}
	if c.record != nil {
		a.ConductorAffinity = c.record.ID
	}
	a.State = baremetal.AllocationAllocating
	if err := c.store.Allocations().Create(ctx, a); err != nil {
		return nil, "", err
	}
	if backfill != nil {
		return a, backfill.UUID, nil
	}
	return a, "", nil
}

// allocationFailed stores a in the error state with reason.
func (c *Conductor) allocationFailed(ctx context.Context, a *baremetal.Allocation, reason string) (*baremetal.Allocation, error) {
	a.NodeUUID, a.State, a.LastError = "", baremetal.AllocationError, reason
	c.log.Warn("allocation failed", "allocation", a.UUID, "reason", reason)
	if err := c.store.Allocations().Update(context.WithoutCancel(ctx), a); err != nil {
		return nil, fmt.Errorf("allocation %s failed (%s) and recording the failure failed: %w", a.UUID, reason, err)
	}
	return a, nil
}

// traitsMatch reports whether the node has every trait of want.
func traitsMatch(want []string, n *baremetal.Node) bool {
	for _, t := range want {
		if !slices.Contains(n.Traits, t) {
			return false
		}
	}
	return true
}

// allocatable is Ironic's filter and _verify_node: the node can take a.
func allocatable(n *baremetal.Node, a *baremetal.Allocation) bool {
	return n.ProvisionState == statemachine.Available && !n.Maintenance && !n.Associated() && n.AllocationUUID == "" &&
		n.PowerState != "" && n.ResourceClass == a.ResourceClass && traitsMatch(a.Traits, n) &&
		(len(a.CandidateNodes) == 0 || slices.Contains(a.CandidateNodes, n.UUID)) &&
		(a.Owner == "" || n.Owner == a.Owner || n.Lessee == a.Owner)
}

// candidates lists the nodes that can take a, in the order to try them.
func (c *Conductor) candidates(ctx context.Context, a *baremetal.Allocation) ([]*baremetal.Node, string, error) {
	f := baremetal.NodeFilter{ProvisionStates: []statemachine.State{statemachine.Available},
		Maintenance: new(false), Associated: new(false)}
	var all []*baremetal.Node
	page := baremetal.Page{Limit: 1000}
	for {
		batch, err := c.store.ListNodes(ctx, f, page)
		if err != nil {
			return nil, "", err
		}
		all = append(all, batch...)
		if len(batch) < page.Limit {
			break
		}
		page.Marker = batch[len(batch)-1].UUID
	}
	// The traits are checked last, for Ironic's messages.
	untraited := a.Clone()
	untraited.Traits = nil
	var matching []*baremetal.Node
	for _, n := range all {
		if allocatable(n, untraited) {
			matching = append(matching, n)
		}
	}
	if len(matching) == 0 {
		if len(a.CandidateNodes) > 0 {
			return nil, "none of the requested nodes are available and match the resource class " + a.ResourceClass, nil
		}
		return nil, "no available nodes match the resource class " + a.ResourceClass, nil
	}
	var out []*baremetal.Node
	for _, n := range matching {
		if traitsMatch(a.Traits, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, "no suitable nodes have the requested traits " + strings.Join(a.Traits, ", "), nil
	}
	// Parallel allocations try the nodes in different orders.
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if a.Name != "" {
		for i, n := range out {
			if n.Name == a.Name {
				out[0], out[i] = out[i], out[0]
				break
			}
		}
	}
	return out, "", nil
}

// allocate is Ironic's do_allocate: find the candidates and take one.
func (c *Conductor) allocate(ctx context.Context, a *baremetal.Allocation) (*baremetal.Allocation, error) {
	nodes, reason, err := c.candidates(ctx, a)
	if err != nil && ctx.Err() != nil {
		// Stopping: left allocating, resumed at the next start.
		return nil, err
	}
	if err != nil {
		return c.allocationFailed(ctx, a, "Unexpected exception during allocation: "+describeErr(err))
	}
	if reason != "" {
		return c.allocationFailed(ctx, a, reason)
	}
	attempts, interval := c.opts.LockPolicy.Attempts, c.opts.LockPolicy.Interval
	if attempts < 1 {
		attempts = baremetal.DefaultLockAttempts
	}
	if interval <= 0 {
		interval = baremetal.DefaultLockInterval
	}
	// As Ironic, any node is retried (not each) the lock policy's times.
	for attempt := 1; ; attempt++ {
		var retry []*baremetal.Node
		for _, n := range nodes {
			took, locked, err := c.takeNode(ctx, a, n.UUID)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil, err
			case err != nil:
				return c.allocationFailed(ctx, a, "Unexpected exception during allocation: "+describeErr(err))
			case took:
				c.history(ctx, n.UUID, "allocated", "allocation", fmt.Sprintf("node reserved for allocation %s", a.UUID), baremetal.HistoryInfo)
				return a, nil
			case locked:
				retry = append(retry, n)
			}
		}
		if len(retry) == 0 {
			return c.allocationFailed(ctx, a, "all nodes were filtered out during reservation")
		}
		if attempt >= attempts {
			return c.allocationFailed(ctx, a, fmt.Sprintf("could not reserve any of %d suitable nodes", len(retry)))
		}
		nodes = retry
		select {
		case <-ctx.Done():
			return c.allocationFailed(ctx, a, fmt.Sprintf("could not reserve any of %d suitable nodes: %v", len(retry), ctx.Err()))
		case <-c.clock.After(interval):
		}
	}
}

// takeNode tries to bind a to node uuid under the node's lock (no lock
// retry): locked reports a node held by someone else, took a success.
// A node no longer suitable, or claimed by another allocation meanwhile,
// gives neither. The node is never left reserved.
func (c *Conductor) takeNode(ctx context.Context, a *baremetal.Allocation, uuid string) (took, locked bool, err error) {
	n, err := c.reserve(ctx, uuid)
	if errors.Is(err, baremetal.ErrNodeLocked) {
		return false, true, nil
	}
	if errors.Is(err, baremetal.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	defer c.releaseQuietly(uuid)
	if !allocatable(n, a) {
		return false, false, nil
	}
	ok, err := c.bind(ctx, a, c.newTask(n))
	return ok, false, err
}

// bind records the binding of a and the locked node of t: the allocation
// first (the unique node_id is the claim), then the node, undoing the
// allocation's write if the node's fails. It reports false when another
// allocation or instance holds the node.
func (c *Conductor) bind(ctx context.Context, a *baremetal.Allocation, t *task) (bool, error) {
	before := a.Clone()
	a.NodeUUID, a.State, a.LastError = t.node.UUID, baremetal.AllocationActive, ""
	if err := c.store.Allocations().Update(ctx, a); err != nil {
		*a = *before
		if errors.Is(err, baremetal.ErrDuplicate) {
			return false, nil
		}
		return false, err
	}
	t.node.InstanceUUID, t.node.AllocationUUID = a.UUID, a.UUID
	if err := t.save(ctx); err != nil {
		undo := a.Clone()
		undo.NodeUUID, undo.State = "", baremetal.AllocationAllocating
		if uerr := c.store.Allocations().Update(context.WithoutCancel(ctx), undo); uerr != nil {
			c.log.Error("allocation bound to a node that was not updated", "allocation", a.UUID, "node", t.node.UUID, "error", uerr)
		} else {
			*a = *undo
		}
		if errors.Is(err, baremetal.ErrDuplicate) {
			// The allocation's UUID is another node's instance.
			return false, &baremetal.DuplicateError{Kind: "node", Field: "instance_uuid", Value: a.UUID}
		}
		return false, err
	}
	return true, nil
}

// backfill is Ironic's backfill_allocation for node uuid.
func (c *Conductor) backfill(ctx context.Context, a *baremetal.Allocation, uuid string) (*baremetal.Allocation, error) {
	fail := func(reason string) (*baremetal.Allocation, error) {
		if _, err := c.allocationFailed(ctx, a, reason); err != nil {
			return nil, err
		}
		return nil, &AllocationFailedError{Allocation: a.UUID, Reason: reason}
	}
	t, err := c.acquire(ctx, uuid)
	if err != nil {
		if _, ferr := c.allocationFailed(ctx, a, describeErr(err)); ferr != nil {
			return nil, ferr
		}
		return nil, err
	}
	defer t.release()
	n := t.node
	var problems []string
	if n.ProvisionState != statemachine.Active {
		problems = append(problems, fmt.Sprintf("Node must be in the \"active\" state, but the current state is %q", n.ProvisionState))
	}
	if a.ResourceClass != "" && n.ResourceClass != a.ResourceClass {
		problems = append(problems, fmt.Sprintf("Resource class %s does not match the requested resource class %s", n.ResourceClass, a.ResourceClass))
	}
	if !traitsMatch(a.Traits, n) {
		problems = append(problems, fmt.Sprintf("List of traits %v does not match the requested traits %v", n.Traits, a.Traits))
	}
	if len(a.CandidateNodes) > 0 && !slices.Contains(a.CandidateNodes, n.UUID) {
		problems = append(problems, fmt.Sprintf("Candidate nodes must be empty or contain the target node, but got %v", a.CandidateNodes))
	}
	if len(problems) > 0 {
		return fail(fmt.Sprintf("Cannot backfill an allocation for node %s: %s", n.UUID, strings.Join(problems, "; ")))
	}
	if n.AllocationUUID != "" && n.AllocationUUID != a.UUID {
		return fail(fmt.Sprintf("Node %s is associated with allocation %s", n.UUID, n.AllocationUUID))
	}
	if n.InstanceUUID != "" && n.InstanceUUID != a.UUID {
		return fail(fmt.Sprintf("Node %s is associated with instance %s", n.UUID, n.InstanceUUID))
	}
	ok, err := c.bind(ctx, a, t)
	if err != nil {
		return fail(describeErr(err))
	}
	if !ok {
		return fail(fmt.Sprintf("Node %s is associated with another allocation", n.UUID))
	}
	c.history(ctx, n.UUID, "allocation backfilled", "allocation", fmt.Sprintf("allocation %s backfilled for the deployed node", a.UUID), baremetal.HistoryInfo)
	return a, nil
}

// DeleteAllocation deletes allocation ident (UUID or name). An allocation
// bound to a node frees it under the node's lock: the node's
// AllocationUUID and InstanceUUID are cleared. As in Ironic, that is
// refused (ErrVerbRefused) unless the node is in maintenance, when the
// node is active or in a transition where updates are not allowed.
func (c *Conductor) DeleteAllocation(ctx context.Context, ident string) error {
	a, err := c.store.Allocations().Get(ctx, ident)
	if err != nil {
		return err
	}
	if a.NodeUUID == "" {
		return c.store.Allocations().Delete(ctx, a.UUID)
	}
	t, err := c.acquire(ctx, a.NodeUUID)
	if errors.Is(err, baremetal.ErrNotFound) {
		return c.store.Allocations().Delete(ctx, a.UUID)
	}
	if err != nil {
		return err
	}
	defer t.release()
	n := t.node
	if !n.Maintenance {
		if n.TargetProvisionState != "" && !statemachine.UpdateAllowed(n.ProvisionState) {
			return &VerbError{Verb: "delete allocation", Node: n.UUID, State: n.ProvisionState,
				Reason: fmt.Sprintf("cannot remove allocation %s: the node is in state %s where updates are not allowed (and maintenance mode is off)", a.UUID, n.ProvisionState)}
		}
		if n.ProvisionState == statemachine.Active {
			return &VerbError{Verb: "delete allocation", Node: n.UUID, State: n.ProvisionState,
				Reason: fmt.Sprintf("cannot remove allocation %s: the node is active (and maintenance mode is off)", a.UUID)}
		}
	}
	if err := c.unbind(ctx, t, a.UUID); err != nil {
		return err
	}
	if err := c.store.Allocations().Delete(ctx, a.UUID); err != nil && !errors.Is(err, baremetal.ErrNotFound) {
		return err
	}
	c.history(ctx, n.UUID, "allocation deleted", "allocation", fmt.Sprintf("allocation %s removed", a.UUID), baremetal.HistoryInfo)
	return nil
}

// unbind clears allocation uuid from the locked node of t.
func (c *Conductor) unbind(ctx context.Context, t *task, uuid string) error {
	n := t.node
	if n.AllocationUUID != uuid && n.InstanceUUID != uuid {
		return nil
	}
	if n.AllocationUUID == uuid {
		n.AllocationUUID = ""
	}
	if n.InstanceUUID == uuid {
		n.InstanceUUID = ""
	}
	return t.save(ctx)
}

// dropAllocation deletes the allocation of a node being torn down, as
// Ironic's tear-down does; the caller saves the node.
func (c *Conductor) dropAllocation(ctx context.Context, n *baremetal.Node) {
	if n.AllocationUUID == "" {
		return
	}
	if err := c.store.Allocations().Delete(ctx, n.AllocationUUID); err != nil && !errors.Is(err, baremetal.ErrNotFound) {
		c.log.Warn("allocation of a torn down node not deleted", "node", n.UUID, "allocation", n.AllocationUUID, "error", err)
	}
	if n.InstanceUUID == n.AllocationUUID {
		n.InstanceUUID = ""
	}
	n.AllocationUUID = ""
}

// resumeAllocations finishes, at start-up, the allocations this
// conductor was processing when it stopped (state allocating with its
// conductor ID), as Ironic's conductor resumes them: each is processed
// again (a backfill too: its node was not recorded yet, so it is
// processed as a request, as Ironic's do_allocate does).
func (c *Conductor) resumeAllocations(ctx context.Context) {
	if c.record == nil {
		return
	}
	f := baremetal.AllocationFilter{State: baremetal.AllocationAllocating, ConductorAffinity: c.record.ID}
	page := baremetal.Page{Limit: 100}
	for {
		batch, err := c.store.Allocations().List(ctx, f, page)
		if err != nil {
			c.log.Warn("unfinished allocations not resumed", "error", err)
			return
		}
		for _, a := range batch {
			if a.ResourceClass == "" {
				if _, err := c.allocationFailed(ctx, a, "interrupted before a node was recorded, and without a resource class"); err != nil {
					c.log.Warn("unfinished allocation not resumed", "allocation", a.UUID, "error", err)
				}
				continue
			}
			if _, err := c.allocate(ctx, a); err != nil {
				c.log.Warn("unfinished allocation not resumed", "allocation", a.UUID, "error", err)
			}
		}
		if len(batch) < page.Limit {
			return
		}
		page.Marker = batch[len(batch)-1].UUID
	}
}
