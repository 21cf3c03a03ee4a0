package conductor

import "context"

// Publish hands e to the conductor's watchers as the engine does, so the
// package's external tests can drive Watch and Subscribe without running
// a workflow per event.
func (c *Conductor) Publish(e Event) { c.hub.publish(e) }

// The periodic tasks run one pass each, for the package's external tests,
// which advance a fake clock and then want the task's effect at once. An
// embedder never needs them: the conductor runs each on its own interval
// (see "Periodic tasks" in the package doc).

// CheckTimeouts runs checkTimeouts once.
func (c *Conductor) CheckTimeouts(ctx context.Context) { c.checkTimeouts(ctx) }

// SyncPowerStates runs syncPowerStates once.
func (c *Conductor) SyncPowerStates(ctx context.Context) { c.syncPowerStates(ctx) }

// RecoverPowerFailures runs recoverPowerFailures once.
func (c *Conductor) RecoverPowerFailures(ctx context.Context) { c.recoverPowerFailures(ctx) }

// CheckOrphanNodes runs checkOrphanNodes once.
func (c *Conductor) CheckOrphanNodes(ctx context.Context) { c.checkOrphanNodes(ctx) }

// SyncLocalState runs syncLocalState once.
func (c *Conductor) SyncLocalState(ctx context.Context) { c.syncLocalState(ctx) }

// ConsoleHostKey is the driver_internal_info key naming the conductor
// that runs a node's console, for the tests of the console hand-over.
const ConsoleHostKey = consoleHostKey

// BusyWorkers is how many workers are running a job.
func (c *Conductor) BusyWorkers() int64 { return c.busy.Load() }
