// Package conductor is Anvil's provisioning engine: the core of Ironic's
// conductor. It takes verbs (manage, inspect, provide, deploy, undeploy,
// rescue, service, ...) on the nodes of a baremetal.Store, runs them through
// the nodes' drivers and ramdisk agents in a bounded worker pool, and keeps
// the fleet in order with periodic tasks. All state lives in the store, so
// another conductor can resume whatever this one leaves behind.
//
// # Lifecycle
//
// New builds a conductor over a store and a driver registry; it touches
// nothing until it is started.
//
//	store, err := sqlstore.OpenSQLite(ctx, "anvil.db", sqlstore.Options{})
//	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{"ipmi"}})
//	cond, err := conductor.New(store, reg, conductor.Options{Hostname: "c1"})
//
// Then either Launch it, which registers the conductor, recovers what a
// previous run of the same hostname left behind, starts the workers and the
// periodic tasks and returns at once; or Run it (Start is the same, under
// controller-runtime's name), which does the same, blocks until its context
// ends and then drains it (below). While it runs, call
// verbs; follow nodes with WaitFor, Watch or Subscribe; and end with Drain
// (leave the fleet gracefully: let the running operations finish, hand the
// nodes over) or Stop (stop now: cancel what is still running once ctx
// ends). A conductor is started once; after Stop it cannot be restarted.
//
// # Verbs return once the intent is stored
//
// A verb checks the request, moves the node to its transitional state
// (deploying, cleaning, ...) and stores its intent on the node row, all
// under the node's reservation; then it returns, and a worker does the
// work. The verb's error says only whether the request was accepted. To
// learn the outcome, wait for it:
//
//	if err := cond.Deploy(ctx, "n1", conductor.DeployOptions{}); err != nil {
//		return err // refused: nothing changed
//	}
//	n, err := cond.WaitFor(ctx, "n1", statemachine.Active)
//	if errors.Is(err, conductor.ErrNodeFailed) {
//		log.Printf("deploy failed: %s", n.LastError)
//	}
//
// WaitFor returns the node once it is in one of the given states, a
// *WaitError matching ErrNodeFailed when it lands in a failure state it was
// not waiting for, and a *WaitError wrapping ctx.Err() when ctx ends first.
// Watch (a channel) and Subscribe (a callback) deliver the events
// (transitions, steps, power changes, maintenance) for dashboards and
// audit; the node history in the store keeps the same events. Both exist
// because they suit different consumers over one mechanism: Watch ends
// with a context and fits a select loop (WaitFor is built on it);
// Subscribe needs no goroutine of the caller's, so a metrics recorder or
// an event log costs no forwarding hop and no context. Each holds at most
// Options.WatchBuffer events (default 1024) for a slow consumer; beyond
// that the oldest are dropped, never the engine blocked, and the next
// event delivered says how many in Event.Dropped (the conductor's
// anvil_conductor_watch_events_dropped_total counts them all). A
// consumer that must not miss a transition reads the node history, which
// is never dropped.
//
// # Options
//
// The zero value of every Options field is its default (named on the field,
// mostly Ironic's configuration default); for intervals, timeouts and
// limits a negative value turns the feature off (DrainTimeout -1: no grace
// period; SyncPowerStateInterval -1: no power sync; MaxConcurrentDeploy -1:
// no limit). Options.Agent configures the ramdisk agent: its client, the
// URL agents call back on and fast track; serve the agents' lookup and
// heartbeat API with agentclient.NewHandler(cond.AgentBackend(), ...).
//
// Every logger an embedder configures is a *slog.Logger, and nil means
// slog.Default(), so a program that calls slog.SetDefault once is heard
// from everywhere: Options.Logger, the agentclient Client, Handler and
// Server configs, plugin.HostConfig, sqlstore.NewNotifier and the Redfish
// driver's Options. hclog stays inside the plugin boundary: plugin
// processes log hclog JSON on stderr, and the plugin host re-levels it
// into its *slog.Logger. Pass slog.New(slog.DiscardHandler) to silence a
// component.
//
// # Periodic tasks
//
// Launch runs Ironic's periodic tasks on their Options intervals: the
// callback timeout check (CheckProvisionStateInterval), power state sync
// (SyncPowerStateInterval), power failure recovery
// (PowerFailureRecoveryInterval) and, in cluster mode, the orphan check
// and the local state sync (ClusterOptions). None has an on-demand
// trigger, as in Ironic: a run covers every node of the conductor, so a
// trigger would only race the loop that already runs it, and an embedder
// that wants fresher power states shortens SyncPowerStateInterval; the
// power state of one node is set, and read back, with SetPowerState.
//
// # Network boot
//
// Nodes whose boot interface is one of package driver/pxe's (pxe, ipxe,
// http, http-ipxe) boot their ramdisk from Anvil's boot server (package
// netboot). Hand the conductor to the boot server as its stage.Observer
// (ObserveBootStage, which never blocks) and its netboot.Resolver
// (NodeForMAC): each stage the server serves a node (DHCP, TFTP, the
// iPXE script, kernel, ramdisk) lands in the node's history (event type
// "boot") and in Watch as EventBootStage, beside the stages the conductor
// records itself (boot prepared, the agent's lookup and first
// heartbeat); the later heartbeats of a node in a wait state are lines of
// event type "agent" (EventTypeAgent), written with the heartbeat's own
// save, at most one per 10 s. The callback-timeout periodic fails a node in a wait state
// whose boot stalled (Options.BootStageDeadlines, each well under the
// 30-minute callback timeout) as the timeout would, early, with a
// last_error that says where the boot stopped:
//
//	Timeout reached while waiting for callback for node ...: boot stalled:
//	boot configuration written at 10:42:00, DHCP offered 192.0.2.23 at
//	10:42:03, TFTP undionly.kpxe sent at 10:42:04, no boot script or
//	kernel request in 300 s
//
// # Tracing
//
// With Options.TracerProvider set (an OpenTelemetry SDK provider; nil
// traces nothing), every operation is one trace. The verb that accepts
// it starts the root span, named after the verb ("deploy"), and keeps
// its W3C trace context in the node's driver_internal_info
// ("anvil_trace_context") until the node comes to rest, so the pieces
// that run later, on any conductor, join it: "job <op>", "heartbeat" and
// "command done" (the continuations of a wait), "step <kind>.<step>",
// "agent wait <step>", the agent client's command spans (give its
// agentclient.ClientConfig the same provider), the driver calls sent to
// plugins (plugin.HostConfig.TracerProvider; the plugin process continues
// the trace) and "boot", a ramdisk's network boot from its preparation to
// the agent's first heartbeat with one event per boot stage.
//
// # Cluster mode
//
// Leave Options.Cluster nil for a lone conductor, which owns every node of
// its conductor group. With a ClusterOptions, several conductors (in one
// process over SQLite, or on several hosts over PostgreSQL) share a store:
// a hash ring per conductor group and hardware type gives each node one
// owner, a verb accepted by any conductor is handed to the owner, the
// nodes of a conductor whose keepalive stops are taken over, and Drain
// hands this conductor's nodes to the others. Set ClusterOptions.Notifier
// (sqlstore.NewNotifier on PostgreSQL, baremetal.NewLocalNotifier in one
// process) to make membership changes and hand-offs immediate rather than
// periodic. NodeOwner says which conductor owns a node; ErrNoConductor
// when none is alive. docs/takeover.md, at the root of the repository,
// explains when a dead conductor's nodes are released and how each
// interrupted operation is resumed, restarted, left to wait or failed.
//
// # Rescue
//
// Rescue(ctx, node, password) boots an active node into a rescue
// ramdisk. With a rescue interface that is an AgentRescuer (the "agent"
// rescue interface of package agentdeploy) the conductor powers the node
// off, leaves the tenant network, has the boot interface prepare the
// rescue ramdisk (rescue_kernel and rescue_ramdisk) and powers it on; at
// the agent's heartbeat it sends the password's crypt hash
// (Options.RescuePasswordHashAlgorithm, SHA-256 by default) with
// rescue.finalize_rescue, never the password, and the node is "rescue"
// once the agent answers SUCCEEDED. Unrescue boots the instance from its
// disk again. The password and its hash live in instance_info only while
// the rescue runs; views mask them.
//
// # Consoles
//
// SetConsoleMode enables or disables a node's serial console and returns
// once the request is accepted (validation errors come back at once); the
// node's owner starts or stops the console, because a console is a
// process of the conductor that runs it. ConsoleInfo reports the mode
// and, for an enabled console, its type and URL:
//
//	if err := cond.SetConsoleMode(ctx, "n1", true); err != nil {
//		return err // unsupported, invalid driver_info, locked: nothing changed
//	}
//	// ... once the node's history (or Watch, EventConsole) says
//	// "console enabled":
//	st, err := cond.ConsoleInfo(ctx, "n1")
//	fmt.Println(st.Enabled, st.Info.URL)
//
// console_enabled is the operator's wish and outlives the processes: a
// conductor that starts again starts the enabled consoles of its nodes; a
// node's new owner starts the console its old owner ran (once that owner
// is dead, or has stopped it: two processes never hold one BMC's
// serial-over-LAN session); a tear-down stops the console but keeps it
// enabled, so that it is not exposed to the next instance's user, and the
// next deploy starts it again as the node goes active. A console that
// cannot be started then is disabled, and last_error says why. Delete
// stops and disables it. Every one of these lands in the node history
// (event type "console") and in Watch (EventConsole).
//
// Stop and Drain leave consoles alone (console_enabled stays, so the next
// start or the new owner starts them again): the console processes
// belong to the embedder's console.Manager, which the console interface
// (console/ipmisol) starts them through. An embedder closes that manager
// after the conductor has stopped, so that no console outlives the
// process and none is stopped under a running operation:
//
//	consoles := console.NewManager(console.Options{})
//	// ... register ipmisol with consoles, build and Launch cond ...
//	defer consoles.Close() // runs after cond.Stop: no orphan console
//	defer cond.Stop(ctx)
//
// # Running under controller-runtime
//
// A Kubernetes operator adds the conductor to its manager:
//
//	if err := mgr.Add(cond); err != nil {
//		return err
//	}
//
// The manager calls the conductor's Start (Run) on every replica, since
// NeedLeaderElection is false (the hash ring, not a leader, shares the
// nodes out), and when the manager's context ends Start drains the
// conductor within Options.DrainTimeout before it returns. Start blocks,
// as a manager.Runnable must; an embedder that wants a start that returns
// at once calls Launch.
//
// # Synchronous node operations
//
// Some calls answer at once instead of storing an intent, as the RPCs
// Ironic's API waits for: Validate (per interface, {result, reason}),
// GetBootDevice, SetBootDevice, SupportedBootDevices, InjectNMI,
// SetTargetRAIDConfig, BIOSSettings, FirmwareComponents, VendorMethods,
// VendorPassthru, and AttachVirtualMedia, DetachVirtualMedia and
// VirtualMediaState. Each composes the node's driver and calls it: under
// the node's reservation where Ironic takes its exclusive lock (a locked
// node fails with baremetal.ErrNodeLocked once the LockPolicy is spent),
// on the node as read where Ironic takes a shared one (Validate, the
// supported boot devices, the vendor methods, the BIOS, firmware and
// virtual media reads). The reservation is released before the call
// returns, whatever happens; what a driver changed on the node (the fake
// keeps its boot device in driver_internal_info) is saved under it. Only
// an asynchronous vendor method outlives the call: a worker runs it with
// the reservation (ErrNoFreeWorker when every worker is busy).
//
// # Errors
//
// Branch with errors.Is on the sentinels; the typed errors that match them
// carry the detail (errors.As):
//
//	ErrConductorNotRunning    a verb before Launch/Run or after Stop
//	ErrVerbRefused            *VerbError: the node's state or settings refuse the verb
//	statemachine.ErrInvalidTransition  *statemachine.TransitionError: no such transition
//	ErrConcurrentActionLimit  *ConcurrentActionLimitError: too many deploys or cleans; retry later
//	ErrUpdateInProgress       *VerbError: Update during a transition
//	ErrDeleteRefused          *VerbError: Delete in a state that forbids it
//	ErrNodeFailed             *WaitError: WaitFor saw the node fail
//	ErrNoConductor            *NoConductorError: no live conductor owns the node
//	ErrConsoleNotEnabled      *ConsoleNotEnabledError: ConsoleInfo of a disabled console
//	ErrNoFreeWorker           *NoFreeWorkerError: an async vendor method found every worker busy
//	driver.ErrUnsupported     *driver.UnsupportedError: the node has no such
//	                          interface or capability (SetConsoleMode on
//	                          no-console, InjectNMI without NMIInjector)
//	driver.ErrInvalidParameter, driver.ErrMissingParameter
//	                          the driver refused the node or the arguments
//	                          (SetBootDevice of an unsupported device)
//	baremetal.ErrNotFound, baremetal.ErrNodeLocked, baremetal.ErrInvalidInput
//	                          from the store: unknown node, node locked past the
//	                          LockPolicy, a field the node cannot have
//
// A refused verb changes nothing. Never compare error text.
//
// # Concurrency
//
// Every method of a Conductor is safe for concurrent use: verbs on the same
// node are serialized by its reservation (a second one waits per
// Options.LockPolicy, then fails with baremetal.ErrNodeLocked), verbs on
// different nodes run in parallel, and several conductors may share a
// store. A Subscribe callback runs on a goroutine of its own and must not
// call Stop or its own cancel; Stop and Drain end every Watch and
// Subscribe.
package conductor
