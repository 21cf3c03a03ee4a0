package faultlab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
)

// Fleet is what an outage scenario drives: a conductor whose store
// reaches its database through Proxy (PostgreSQL) or suffers Fault (a
// storage fault of the caller's, such as a full disk under SQLite), the
// nodes the verb runs on, and a spare node (not in Nodes, in a stable
// state) the write probe toggles maintenance on.
type Fleet struct {
	Conductor *conductor.Conductor
	Store     baremetal.Store
	Proxy     *Proxy
	// Fault is what Run cuts and restores; StartFleet sets it to Proxy.
	Fault Fault
	Nodes []string
	Spare string
}

// Fault is an outage Run starts (Cut) and ends (Restore, which returns
// how long it lasted). *Proxy is one.
type Fault interface {
	Cut()
	Restore() time.Duration
}

// Cut describes one outage: the verb started on every node, how long
// after the verbs start the proxy is cut, and for how long.
type Cut struct {
	// Verb is called once per node, concurrently (Parallel at a time);
	// a refusal of the concurrency limits is retried.
	Verb     func(ctx context.Context, uuid string) error
	Parallel int
	// After is the time from the first verb to the cut.
	After time.Duration
	// Length is how long the proxy stays cut.
	Length time.Duration
	// Settle bounds the wait for every node to settle after the restore.
	Settle time.Duration
}

// Report is what one cut measured.
type Report struct {
	// Cut is how long the proxy was really cut.
	Cut time.Duration `json:"cut_s"`
	// ReadAfter and WriteAfter are the time from the restore to the
	// first read (GetNode) and the first write (maintenance on the spare
	// node) that succeeded.
	ReadAfter  time.Duration `json:"read_after_s"`
	WriteAfter time.Duration `json:"write_after_s"`
	// Recovered is the time from the restore until every node was in a
	// stable or failure state with no reservation; zero when they did
	// not within Cut.Settle.
	Recovered time.Duration `json:"recovered_s"`
	// SlowestCall is the longest a read or write probe took during the
	// cut (each probe fails, but none may hang).
	SlowestCall time.Duration `json:"slowest_call_during_cut_s"`
	// FailedWrites counts the write probes during the cut that failed:
	// more than zero shows the fault reached the database.
	FailedWrites int `json:"failed_writes_during_cut"`
	// SlowestVerb is the longest one call of Cut.Verb took (the verbs
	// answer their caller; none may wait for the database's return).
	SlowestVerb time.Duration `json:"slowest_verb_s"`
	// VerbErrors counts verbs refused for another reason than the
	// concurrency limits (the database being away, mostly).
	VerbErrors int `json:"verb_errors"`
	// States counts the nodes per provision state at the end, Failed
	// maps each node that ended in a failure state to its last error, and
	// Stuck lists the nodes that were still busy or reserved.
	States map[string]int    `json:"states"`
	Failed map[string]string `json:"failed,omitempty"`
	Stuck  []string          `json:"stuck,omitempty"`
}

// settled reports whether n needs nothing more from a conductor.
func settled(n *baremetal.Node) bool {
	s := n.ProvisionState
	return n.Reservation == "" && (statemachine.IsStable(s) || statemachine.IsFailure(s))
}

// Run starts c.Verb on every node, cuts f.Proxy after c.After for
// c.Length while probing reads and writes, restores it, and measures
// how long reads, writes and the fleet take to come back.
func Run(ctx context.Context, f Fleet, c Cut) (Report, error) {
	if c.Parallel <= 0 {
		c.Parallel = 16
	}
	if c.Settle <= 0 {
		c.Settle = 2 * time.Minute
	}
	var rep Report
	var (
		mu          sync.Mutex
		verbErrs    int
		slowestVerb time.Duration
	)
	verbCtx, stopVerbs := context.WithCancel(ctx)
	defer stopVerbs()
	var verbs sync.WaitGroup
	verbsDone := make(chan struct{})
	sem := make(chan struct{}, c.Parallel)
	for _, uuid := range f.Nodes {
		verbs.Add(1)
		go func() {
			defer verbs.Done()
			select {
			case sem <- struct{}{}:
			case <-verbCtx.Done():
				return
			}
			defer func() { <-sem }()
			for verbCtx.Err() == nil {
				vctx, cancel := context.WithTimeout(verbCtx, 30*time.Second)
				start := time.Now()
				err := c.Verb(vctx, uuid)
				took := time.Since(start)
				cancel()
				mu.Lock()
				slowestVerb = max(slowestVerb, took)
				mu.Unlock()
				if !errors.Is(err, conductor.ErrConcurrentActionLimit) {
					if err != nil {
						mu.Lock()
						verbErrs++
						mu.Unlock()
					}
					return
				}
				select {
				case <-verbCtx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}

	go func() { verbs.Wait(); close(verbsDone) }()
	select {
	case <-ctx.Done():
		return rep, ctx.Err()
	case <-time.After(c.After):
	}
	fault := f.Fault
	if fault == nil {
		fault = f.Proxy
	}
	fault.Cut()
	cutEnd := time.Now().Add(c.Length)
	for time.Now().Before(cutEnd) {
		read, _ := probe(ctx, f, false)
		write, werr := probe(ctx, f, true)
		if werr != nil {
			rep.FailedWrites++
		}
		rep.SlowestCall = max(rep.SlowestCall, read, write)
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rep.Cut = fault.Restore()
	restored := time.Now()

	deadline := restored.Add(c.Settle)
	var readOK, writeOK bool
	for time.Now().Before(deadline) && !(readOK && writeOK) {
		if !readOK {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := f.Store.GetNode(pctx, f.Spare)
			cancel()
			if err == nil {
				readOK, rep.ReadAfter = true, time.Since(restored)
			}
		}
		if !writeOK {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := toggleMaintenance(pctx, f)
			cancel()
			if err == nil {
				writeOK, rep.WriteAfter = true, time.Since(restored)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !readOK || !writeOK {
		return rep, fmt.Errorf("faultlab: reads (%v) or writes (%v) did not resume within %v of the restore", readOK, writeOK, c.Settle)
	}
	// The verbs refused during the cut stay refused; the ones still
	// retrying a limit go on until the fleet settles.
	for {
		var stuck []string
		for _, uuid := range f.Nodes {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := f.Store.GetNode(pctx, uuid)
			cancel()
			if err != nil || !settled(n) {
				stuck = append(stuck, uuid)
			}
		}
		finished := false
		select {
		case <-verbsDone:
			finished = true
		default:
		}
		if len(stuck) == 0 && finished {
			rep.Recovered = time.Since(restored)
			break
		}
		if time.Now().After(deadline) {
			rep.Stuck = stuck
			break
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopVerbs()
	verbs.Wait()
	rep.VerbErrors = verbErrs
	rep.SlowestVerb = slowestVerb
	rep.States = map[string]int{}
	for _, uuid := range f.Nodes {
		n, err := f.Store.GetNode(ctx, uuid)
		if err != nil {
			return rep, err
		}
		rep.States[string(n.ProvisionState)]++
		if statemachine.IsFailure(n.ProvisionState) || n.ProvisionState == statemachine.Error {
			if rep.Failed == nil {
				rep.Failed = map[string]string{}
			}
			rep.Failed[uuid] = n.LastError
		}
	}
	slices.Sort(rep.Stuck)
	return rep, nil
}

// probe makes one read or one write during the cut and returns how long
// it took and its error (expected, for a write).
func probe(ctx context.Context, f Fleet, write bool) (time.Duration, error) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var err error
	if write {
		err = toggleMaintenance(pctx, f)
	} else {
		_, err = f.Store.GetNode(pctx, f.Spare)
	}
	return time.Since(start), err
}

// toggleMaintenance is the write probe: maintenance on the spare node,
// then off again, each a conductor verb that reserves the node.
func toggleMaintenance(ctx context.Context, f Fleet) error {
	if err := f.Conductor.SetMaintenance(ctx, f.Spare, true, "faultlab write probe"); err != nil {
		return err
	}
	return f.Conductor.SetMaintenance(ctx, f.Spare, false, "")
}
