package conductor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// job is one unit of work for the pool: an intent to execute or a
// heartbeat to process.
type job struct {
	uuid string
	kind jobKind
	// node is set when the job is handed over with the reservation
	// already held by this conductor (the verb just took it).
	node *baremetal.Node
	// ports, when portsLoaded, are node's ports as the verb read them
	// under that same reservation, so the worker needs not read them
	// again.
	ports       []*baremetal.Port
	portsLoaded bool
	// run, when set, is work handed straight to an idle worker with the
	// reservation of node uuid held (an asynchronous vendor passthru
	// call): the worker runs it and releases the node. Such a job is
	// never queued.
	run func(ctx context.Context)
	// watched is the finished command wait a jobCommandDone continues.
	watched *commandWatch
	// done, when set, is called once a jobTakeover has run.
	done func()
}

type jobKind int

const (
	jobIntent jobKind = iota
	jobHeartbeat
	// jobCommandDone continues a node whose agent command finished
	// (AgentSettings.PollCommands).
	jobCommandDone
	// jobTakeover takes over a node a dead conductor left mid-operation
	// (takeOverNode).
	jobTakeover
)

func (j job) key() string {
	switch j.kind {
	case jobHeartbeat:
		return "hb:" + j.uuid
	case jobCommandDone:
		id := ""
		if j.watched != nil {
			id = j.watched.id
		}
		return "cmd:" + j.uuid + ":" + id
	case jobTakeover:
		return "takeover:" + j.uuid
	}
	return j.uuid
}

// jobQueue is the work waiting for a worker, in two FIFOs: an agent's
// heartbeat or finished command (prompt: agentJob) goes before the rest
// (intents, takeovers), so that it waits for the next free worker rather
// than behind a backlog of operations that each hold a worker for
// seconds. A heartbeat that waited behind such a backlog on a loaded
// conductor went unprocessed past the callback timeout (the chaos test's
// 500 nodes under -race). It holds node UUIDs only: the work itself is
// the intent persisted on the node, so nothing is lost if the process
// dies with a full queue.
type jobQueue struct {
	mu     sync.Mutex
	prompt []job
	items  []job
	queued map[string]bool
	wake   chan struct{}
	closed bool
}

// agentJob says j continues a node for its agent (a heartbeat, a
// finished command): short work that a waiting agent's node needs.
func agentJob(j job) bool { return j.kind == jobHeartbeat || j.kind == jobCommandDone }

func newJobQueue() *jobQueue {
	return &jobQueue{queued: make(map[string]bool), wake: make(chan struct{}, 1)}
}

func (q *jobQueue) push(j job) bool {
	j.node, j.ports, j.portsLoaded = nil, nil, false
	q.mu.Lock()
	if q.closed || q.queued[j.key()] {
		q.mu.Unlock()
		return false
	}
	q.queued[j.key()] = true
	if agentJob(j) {
		q.prompt = append(q.prompt, j)
	} else {
		q.items = append(q.items, j)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

func (q *jobQueue) pop(ctx context.Context) (job, bool) {
	for {
		q.mu.Lock()
		for _, lane := range []*[]job{&q.prompt, &q.items} {
			if len(*lane) == 0 {
				continue
			}
			j := (*lane)[0]
			(*lane)[0] = job{}
			*lane = (*lane)[1:]
			delete(q.queued, j.key())
			q.mu.Unlock()
			return j, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return job{}, false
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return job{}, false
		}
	}
}

func (q *jobQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.prompt) + len(q.items)
}

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	dropped := append(q.prompt, q.items...)
	q.prompt, q.items = nil, nil
	q.mu.Unlock()
	for _, j := range dropped {
		// Whoever waits for a dropped job stops waiting.
		if j.done != nil {
			j.done()
		}
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// submit hands j to an idle worker at once, or queues it. A job carrying
// a reservation that cannot be handed over has its reservation released
// first: queued work never holds a lock. It reports false when j was
// dropped: the conductor is not running, or the same job is queued
// already.
func (c *Conductor) submit(j job) bool {
	if !c.running.Load() {
		if j.node != nil {
			c.releaseQuietly(j.node.UUID)
		}
		return false
	}
	select {
	case c.handoff <- j:
		return true
	default:
	}
	if j.node != nil {
		// The reservation goes; the worker that pops the job later
		// reserves the node afresh (and reads it anew).
		c.releaseQuietly(j.node.UUID)
		j.node = nil
	}
	queued := c.queue.push(j)
	c.metrics.queuedIntents.Set(float64(c.queue.len()))
	return queued
}

// releaseQuietly releases this conductor's reservation of the node. A
// release the store fails (a database away, a stalled statement past its
// 10 s bound) is tried again in the background with a growing pause (up
// to storeRetryMax) for as long as the conductor runs, so the caller (a
// verb answering an API request, a worker) never waits for the
// database's return: nothing else would ever release a live conductor's
// reservation, and the node's agent and verbs would be refused until a
// restart. A stopping conductor stops retrying: Stop releases all its
// reservations. A node found unlocked, locked by another conductor
// (which broke this one's reservation while the database was away) or
// gone is released as far as this conductor is concerned.
func (c *Conductor) releaseQuietly(uuid string) {
	if c.releaseOnce(uuid, 1) {
		return
	}
	c.mu.Lock()
	if !c.running.Load() {
		c.mu.Unlock()
		c.resv.released(uuid)
		return
	}
	c.releasing.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.releasing.Done()
		pause := c.storeRetryPause
		for attempt := 2; ; attempt++ {
			select {
			case <-c.stopCh:
				c.resv.released(uuid)
				return
			case <-time.After(pause):
			}
			if c.releaseOnce(uuid, attempt) {
				return
			}
			pause = min(2*pause, storeRetryMax)
		}
	}()
}

// releaseOnce makes one attempt of releaseQuietly and reports whether
// the node is released.
func (c *Conductor) releaseOnce(uuid string, attempt int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := c.store.ReleaseNode(ctx, uuid, c.host)
	cancel()
	if err == nil || errors.Is(err, baremetal.ErrNodeNotLocked) || errors.Is(err, baremetal.ErrNotFound) || errors.Is(err, baremetal.ErrNodeLocked) {
		c.resv.released(uuid)
		if attempt > 1 {
			c.log.Info("release succeeded after the database came back", "node", uuid, "attempts", attempt)
			// An intent whose write landed while its answer was lost
			// may wait on the node, which the intent poll run at the
			// database's return skipped as reserved.
			c.recheckIntent(uuid)
		}
		return true
	}
	if baremetal.IsStoreUnavailable(err) {
		c.resv.unavailable()
	}
	if attempt == 1 || attempt%20 == 0 {
		c.log.Warn("release failed; retrying until the database answers", "node", uuid, "attempt", attempt, "error", err)
	}
	return false
}

// recheckIntent queues a job for node uuid, which runs its intent if
// one waits on it and does nothing otherwise.
func (c *Conductor) recheckIntent(uuid string) {
	if c.running.Load() {
		c.queue.push(job{uuid: uuid})
	}
}

// storeRetryMax caps the pause between retries of a release or a state
// write, and so bounds how long after the database's return they land.
const storeRetryMax = time.Second

// dispatch feeds queued jobs to workers as they become free.
func (c *Conductor) dispatch(ctx context.Context) {
	defer c.loops.Done()
	for {
		j, ok := c.queue.pop(ctx)
		if !ok {
			return
		}
		c.metrics.queuedIntents.Set(float64(c.queue.len()))
		select {
		case c.handoff <- j:
		case <-ctx.Done():
			return
		}
	}
}

func (c *Conductor) worker() {
	defer c.workers.Done()
	for {
		select {
		case j := <-c.handoff:
			c.busy.Add(1)
			c.metrics.busyWorkers.Inc()
			c.runJob(c.workCtx, j)
			c.metrics.busyWorkers.Dec()
			c.busy.Add(-1)
		case <-c.stopCh:
			return
		}
	}
}
