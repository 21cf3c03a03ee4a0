package conductor

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/steps"
)

// commandWatch is one wait on an agent command (AgentSettings.PollCommands):
// the command, and the step and agent it was started for, so that a
// continuation arriving late (the node failed and moved on to another
// operation meanwhile) is recognised and dropped.
type commandWatch struct {
	id     string
	kind   steps.Kind
	step   steps.Step
	url    string
	cancel context.CancelFunc
}

// current reports whether the node still waits on the watched step of
// the watched agent.
func (w *commandWatch) current(n *baremetal.Node) bool {
	if n.ProvisionState != waitState(w.kind) || agentOf(n).URL != w.url {
		return false
	}
	col := *currentStepColumn(n, w.kind)
	iface, _ := col["interface"].(string)
	name, _ := col["step"].(string)
	return iface == w.step.Interface && name == w.step.Name
}

// Bounds of a command wait.
const (
	// watchFailures is how many consecutive failed waits (the agent not
	// reachable, an error answer) end the wait; the heartbeats go on.
	watchFailures = 3
	// watchPause separates a failed wait from the next attempt.
	watchPause = 2 * time.Second
	// doneLockAttempts and doneLockInterval bound the wait for the node's
	// lock when the command finished: the task that started the step
	// holds it until it has recorded the wait state.
	doneLockAttempts = 20
	doneLockInterval = 250 * time.Millisecond
)

// SetPollCommands turns AgentSettings.PollCommands on or off while the
// conductor runs (from a configuration reload, say). Steps already
// handed to an agent keep the wait they started with.
func (c *Conductor) SetPollCommands(on bool) { c.pollCommands.Store(on) }

// watchCommand waits, in a goroutine owned by the conductor's background
// loops, for the agent's command id to finish and then queues the node's
// continuation (jobCommandDone). A newer watch of the same node replaces
// the older one. It does nothing unless PollCommands is on or when the
// conductor is not running.
func (c *Conductor) watchCommand(parent context.Context, a agentclient.Agent, id string, kind steps.Kind, step steps.Step) {
	if !c.pollCommands.Load() || id == "" || c.agent.Client == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != lifecycleRunning {
		return
	}
	ctx, cancel := context.WithTimeout(c.bg, c.agent.PollCommandsLimit)
	// The wait is a span of the step's trace.
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(parent))
	w := &commandWatch{id: id, kind: kind, step: step, url: a.URL, cancel: cancel}
	if old, loaded := c.watches.Swap(a.NodeUUID, w); loaded {
		old.(*commandWatch).cancel()
	}
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		defer cancel()
		defer c.watches.CompareAndDelete(a.NodeUUID, w)
		wctx, span := c.tracer.Start(ctx, "agent wait "+step.Key(), trace.WithAttributes(attribute.String("anvil.node.uuid", a.NodeUUID),
			attribute.String("anvil.agent.command_id", id)))
		done := c.waitCommand(wctx, a, id)
		span.End()
		if done {
			c.metrics.commandWaits.WithLabelValues("finished").Inc()
			c.submit(job{uuid: a.NodeUUID, kind: jobCommandDone, watched: w})
			return
		}
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.metrics.commandWaits.WithLabelValues("heartbeats").Inc()
		}
	}()
}

// waitCommand waits for the agent's command id to end: true when it
// ended (succeeded or failed: the continuation reads which), false when
// the wait gave up (ctx ended, the agent unreachable watchFailures times
// in a row, or no longer knowing the command).
func (c *Conductor) waitCommand(ctx context.Context, a agentclient.Agent, id string) bool {
	failures := 0
	for ctx.Err() == nil {
		r, err := c.agent.Client.GetCommandStatus(ctx, a, id, true)
		switch {
		case err == nil && r.Status.Done():
			return true
		case err == nil:
			// An agent that answers RUNNING to wait=true (none should):
			// ask again after a pause.
			failures = 0
		case isTimeout(err):
			// The command outlasted one request (CommandTimeout): ask
			// again.
			failures = 0
			continue
		default:
			var api *agentclient.APIError
			if errors.As(err, &api) && api.Status == 404 {
				// A restarted agent no longer knows the command.
				c.log.Debug("agent no longer knows the command; heartbeats drive the run", "node", a.NodeUUID, "command", id)
				return false
			}
			failures++
			if failures >= watchFailures {
				c.log.Debug("agent command wait failed; heartbeats drive the run", "node", a.NodeUUID, "command", id, "error", err)
				return false
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(watchPause):
		}
	}
	return false
}

// isTimeout reports whether err is a request that timed out (the
// transport's timeout, not the caller's context).
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout() && !errors.Is(err, context.Canceled)
}

// processCommandDone continues a node whose agent command finished, as
// its next heartbeat would. The node's lock is retried for a moment (the
// task that started the step may still hold it); a node still locked, in
// maintenance or owned by another conductor is left to the heartbeats,
// and one no longer waiting on the watched step of the watched agent is
// left alone.
func (c *Conductor) processCommandDone(ctx context.Context, uuid string, w *commandWatch) {
	n, err := baremetal.AcquireNode(ctx, c.locks(), uuid, c.host, baremetal.LockPolicy{Attempts: doneLockAttempts, Interval: doneLockInterval})
	if err != nil {
		c.log.Debug("finished agent command not processed; the next heartbeat continues", "node", uuid, "error", err)
		return
	}
	t := c.ownedTask(n)
	if t == nil {
		return
	}
	defer t.release()
	if w == nil || !w.current(n) || n.Maintenance {
		return
	}
	ctx, span := c.startNodeSpan(ctx, n, "command done", attribute.String("anvil.agent.command_id", w.id))
	defer span.End()
	if err := c.continueWait(ctx, t, n.ProvisionState); err != nil {
		c.log.Debug("finished agent command processing ended with an error", "node", uuid, "error", err)
	}
}

// ownedTask wraps the node this conductor just reserved in a task when
// the conductor owns it; otherwise it releases the reservation and
// returns nil: the node's work is its owner's.
func (c *Conductor) ownedTask(n *baremetal.Node) *task {
	if !c.ownsNode(n) {
		c.releaseQuietly(n.UUID)
		return nil
	}
	return c.newTask(n)
}
