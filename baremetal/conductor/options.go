package conductor

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// Defaults of the conductor options, from Ironic's configuration (reference
// §4.2, §5.3, §6).
const (
	DefaultWorkers                 = 64
	DefaultCallbackTimeout         = 1800 * time.Second
	DefaultCheckProvisionInterval  = 60 * time.Second
	DefaultSyncPowerStateInterval  = 120 * time.Second
	DefaultPowerRecoveryInterval   = 300 * time.Second
	DefaultPowerStateSyncRetries   = 3
	DefaultPowerStateChangeTimeout = 60 * time.Second
	DefaultIntentPollInterval      = 60 * time.Second
	DefaultKeepaliveInterval       = 10 * time.Second
	DefaultPeriodicMaxWorkers      = 8
	DefaultMaxConductorWaitStep    = 30 * time.Second
	DefaultMaxConcurrentDeploy     = 250
	DefaultMaxConcurrentClean      = 50
	DefaultDrainTimeout            = 30 * time.Second
)

// Options configure a Conductor. The zero value of every field means the
// default named on it.
type Options struct {
	// Hostname identifies the conductor in reservations and the
	// conductors table; default os.Hostname().
	Hostname string
	// ConductorGroup is the group of nodes this conductor serves ("" is
	// the default group); nodes of other groups are left alone.
	ConductorGroup string
	// Workers bounds how many operations run at once; default
	// DefaultWorkers. Accepted work beyond it waits in the database.
	Workers int
	// DrainTimeout is the grace period Run gives the running operations
	// once its context ends (the Drain it calls is bounded by it); default
	// DefaultDrainTimeout (30 s). Negative means none: Run stops at once
	// and cancels the operations still running, which the next start-up
	// or another conductor's takeover then fails or resumes.
	DrainTimeout time.Duration
	// Clock is the time source of timeouts and periodic tasks; default
	// clock.System().
	Clock clock.Clock
	// Logger receives the conductor's logs; default slog.Default().
	Logger *slog.Logger
	// LockPolicy is how verbs retry a node locked by someone else; default
	// DefaultLockPolicy() (3 attempts 1 s apart).
	LockPolicy *baremetal.LockPolicy

	// DeployCallbackTimeout, CleanCallbackTimeout, RescueCallbackTimeout,
	// ServiceCallbackTimeout and InspectWaitTimeout bound the wait states
	// (default 1800 s each); a negative value disables the check.
	DeployCallbackTimeout  time.Duration
	CleanCallbackTimeout   time.Duration
	RescueCallbackTimeout  time.Duration
	ServiceCallbackTimeout time.Duration
	InspectWaitTimeout     time.Duration
	// RescuePasswordHashAlgorithm hashes the rescue password the agent
	// gets (Ironic's [conductor]rescue_password_hash_algorithm):
	// RescueHashSHA256 ("sha256", the default) or RescueHashSHA512.
	RescuePasswordHashAlgorithm string
	// CheckProvisionStateInterval paces the callback-timeout checks;
	// default 60 s; negative disables them.
	CheckProvisionStateInterval time.Duration
	// SyncPowerStateInterval paces power state sync; default 120 s;
	// negative disables it.
	SyncPowerStateInterval time.Duration
	// PowerStateSyncMaxRetries is how many consecutive failures or
	// mismatches are tolerated before maintenance; default 3.
	PowerStateSyncMaxRetries int
	// KeepHardwarePowerState disables Ironic's default of forcing the
	// hardware back to the recorded power state on a mismatch; the record
	// is updated to the hardware's state instead.
	KeepHardwarePowerState bool
	// DisableHealthMonitoring turns off Ironic's
	// [conductor]enable_health_monitoring (on by default): every power
	// state sync reads the node's hardware health from its management
	// interface (driver.HealthReader) and records a change in the node's
	// health field and history.
	DisableHealthMonitoring bool
	// PowerFailureRecoveryInterval paces the automatic recovery of nodes
	// put in maintenance by power failures; default 300 s; negative
	// disables it.
	PowerFailureRecoveryInterval time.Duration
	// PowerStateChangeTimeout bounds a power action; default 60 s.
	PowerStateChangeTimeout time.Duration
	// PeriodicMaxWorkers bounds how many nodes a periodic task handles in
	// parallel; default 8.
	PeriodicMaxWorkers int
	// IntentPollInterval paces the scan for accepted work this process was
	// not told about (written by another process, or left behind); default
	// 60 s; negative disables it. Intents accepted by this process are
	// handed to its workers at once and never wait for the poll.
	IntentPollInterval time.Duration
	// KeepaliveInterval paces the conductor row's keepalive; default 10 s.
	KeepaliveInterval time.Duration
	// MaxConductorWaitStep caps the seconds argument of a "wait" step;
	// default 30 s.
	MaxConductorWaitStep time.Duration
	// MaxConcurrentDeploy refuses deploy and rebuild with a
	// *ConcurrentActionLimitError while this many nodes are in deploying
	// or wait call-back (Ironic's [conductor]max_concurrent_deploy);
	// default 250; negative means no limit. The nodes are counted in the
	// database, so the limit holds across every conductor sharing it.
	MaxConcurrentDeploy int
	// MaxConcurrentClean refuses undeploy, provide and manual clean with
	// a *ConcurrentActionLimitError while this many nodes are in
	// deleting, cleaning or clean wait (Ironic's
	// [conductor]max_concurrent_clean); default 50; negative means no
	// limit.
	MaxConcurrentClean int
	// MaxConcurrentPerConductorGroup applies MaxConcurrentDeploy and
	// MaxConcurrentClean to each conductor group separately: only the
	// nodes of the verb's node's group are counted (Ironic's
	// [conductor]max_concurrent_per_conductor_group).
	MaxConcurrentPerConductorGroup bool

	// DisableAutomatedClean skips automated cleaning for nodes whose
	// automated_clean field is unset (Ironic's [conductor]automated_clean
	// = False).
	DisableAutomatedClean bool
	// RefuseDeletingAvailable forbids deleting available nodes (Ironic's
	// allow_deleting_available_nodes = False).
	RefuseDeletingAvailable bool
	// CleanStepPriorityOverride maps "interface.step" to a priority for
	// automated cleaning (0 disables the step); a manual clean runs a step
	// at its overridden priority. A key no clean step can have (boot.x,
	// or one without an interface) is ignored with a warning naming it,
	// and the other keys still apply, as in Ironic.
	CleanStepPriorityOverride map[string]int
	// DeployTemplates are the deploy templates, matched by name against
	// instance_info traits. The store's deploy templates
	// (baremetal.Store.DeployTemplates) join them, looked up by those
	// traits at each deployment; a configured template shadows a stored
	// one of the same name.
	DeployTemplates []DeployTemplate

	// Agent configures how the conductor works with ramdisk agents (the
	// agent client, fast track, the API URL agents call back on); the
	// zero value suits drivers that need no agent.
	Agent AgentSettings

	// Cluster, when set, makes the conductor one of several sharing the
	// store: it acts only on the nodes the hash ring gives it and takes
	// over those of dead conductors (see ClusterOptions). Nil means a lone
	// conductor that owns every node of its group.
	Cluster *ClusterOptions

	// BootStageDeadlines bound the time between one network boot stage
	// and the next (stage.Deadlines: zero fields take the defaults, well
	// under the callback timeouts; a negative one disables that check).
	// The callback-timeout periodic fails a node in a wait state whose
	// network boot has stalled as the callback timeout would, early, with
	// last_error saying where the boot stopped; not in a state whose
	// callback timeout is disabled.
	BootStageDeadlines stage.Deadlines
	// BootStageBuffer bounds how many boot stages (those ObserveBootStage
	// receives and the agents' lookups) wait to be written into node
	// history; beyond it they are dropped, never waited for, and counted
	// (anvil_conductor_boot_stages_dropped_total). Zero or negative means
	// DefaultBootStageBuffer.
	BootStageBuffer int

	// TracerProvider, when set, traces every operation as one trace (see
	// "Tracing" in the package documentation): the verb, its jobs, steps,
	// agent commands, boots and the driver calls made through plugins.
	// Nil means no tracing.
	TracerProvider trace.TracerProvider

	// WatchBuffer bounds how many events each Watch and Subscribe holds
	// for a slow consumer; beyond it the oldest are dropped and counted
	// (Event.Dropped, anvil_conductor_watch_events_dropped_total).
	// Default DefaultWatchBuffer (1024); a negative value also means the
	// default, as an unbounded buffer is never offered.
	WatchBuffer int
}

// DeployTemplate is a named list of deploy steps applied when a node's
// instance_info.traits names it.
type DeployTemplate struct {
	Name  string
	Steps []TemplateStep
}

// TemplateStep is one step of a deploy template.
type TemplateStep struct {
	Interface string
	Step      string
	Args      map[string]any
	Priority  int
}

// AgentSettings configure how the conductor works with ramdisk agents.
type AgentSettings struct {
	// Client talks to the agents; required for agent-based deploy
	// interfaces (in-band steps), unused otherwise.
	Client *agentclient.Client
	// FastTrack enables fast track for nodes whose driver_info does not
	// say otherwise (Ironic's [deploy]fast_track).
	FastTrack bool
	// FastTrackTimeout is how recent the agent's last heartbeat must be
	// for fast track; default 300 s.
	FastTrackTimeout time.Duration
	// APIURL is the base URL where agents reach the handler of
	// AgentBackend (IPA's ipa-api-url). In-band inspection (an inspect
	// interface that is a driver.InbandInspector) needs it: the ramdisk
	// is booted with ipa-inspection-callback-url set to
	// APIURL/v1/continue_inspection.
	APIURL string
	// PowerOffWait bounds the wait for a node to power off after its
	// agent was asked to (standby.power_off) at the end of a deploy,
	// before the conductor powers it off out of band (Ironic's
	// [agent]post_deploy_get_power_state_retries times
	// post_deploy_get_power_state_retry_interval); default 30 s.
	PowerOffWait time.Duration
	// PowerOffPollInterval is how often the power state is read during
	// that wait; default 5 s.
	PowerOffPollInterval time.Duration
	// ForceOOBPowerOff is Ironic's [agent]deploy_forces_oob_reboot: the
	// agent is not asked to power the node off; its disks are flushed
	// (standby.sync) and the node is powered off out of band.
	ForceOOBPowerOff bool
	// SyncTimeout bounds the flush (standby.sync, retries included)
	// before a hard power off, so a hung agent delays a power action by
	// at most this long; default 30 s.
	SyncTimeout time.Duration
	// PollCommands continues a step run the moment the agent's command
	// for an in-band step finishes, instead of at the agent's next
	// heartbeat: once a step is handed to the agent, the conductor waits
	// on the command (IPA's GET /v1/commands/{id}?wait=true, each call
	// bounded by the agent client's CommandTimeout and asked again while
	// the command runs) and then does what the heartbeat would. Ironic
	// moves only on heartbeats, so every in-band step costs up to one
	// heartbeat interval of idle time (30 to 60 % of the agent's
	// heartbeat timeout). When the agent cannot be reached the wait
	// ends and heartbeats drive the run as before; a heartbeat and a
	// finished wait arriving together are serialised by the node's lock,
	// and the second one finds nothing left to do. Off by default
	// (Ironic's pacing); anvild turns it on.
	PollCommands bool
	// PollCommandsLimit bounds how long one command is waited on before
	// the heartbeats alone drive the run; default 1 hour.
	PollCommandsLimit time.Duration
}

// withDefaults fills the agent settings left zero (or negative) with
// Ironic's defaults.
func (a AgentSettings) withDefaults() AgentSettings {
	if a.FastTrackTimeout <= 0 {
		a.FastTrackTimeout = 300 * time.Second
	}
	if a.PowerOffWait <= 0 {
		a.PowerOffWait = 30 * time.Second
	}
	if a.PowerOffPollInterval <= 0 {
		a.PowerOffPollInterval = 5 * time.Second
	}
	if a.SyncTimeout <= 0 {
		a.SyncTimeout = 30 * time.Second
	}
	if a.PollCommandsLimit <= 0 {
		a.PollCommandsLimit = time.Hour
	}
	return a
}

func (o *Options) withDefaults() (Options, error) {
	out := *o
	if out.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return out, fmt.Errorf("conductor hostname: %w", err)
		}
		out.Hostname = h
	}
	if len(out.Hostname) > 255 {
		return out, &baremetal.InvalidFieldError{Kind: "conductor", Ident: out.Hostname[:32], Field: "hostname", Expected: "at most 255 characters"}
	}
	if out.DrainTimeout == 0 {
		out.DrainTimeout = DefaultDrainTimeout
	}
	if out.Workers <= 0 {
		out.Workers = DefaultWorkers
	}
	if out.Clock == nil {
		out.Clock = clock.System()
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.LockPolicy == nil {
		p := baremetal.DefaultLockPolicy()
		out.LockPolicy = &p
	}
	if out.LockPolicy.Clock == nil {
		p := *out.LockPolicy
		p.Clock = out.Clock
		out.LockPolicy = &p
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&out.DeployCallbackTimeout, DefaultCallbackTimeout)
	def(&out.CleanCallbackTimeout, DefaultCallbackTimeout)
	def(&out.RescueCallbackTimeout, DefaultCallbackTimeout)
	def(&out.ServiceCallbackTimeout, DefaultCallbackTimeout)
	def(&out.InspectWaitTimeout, DefaultCallbackTimeout)
	def(&out.CheckProvisionStateInterval, DefaultCheckProvisionInterval)
	def(&out.SyncPowerStateInterval, DefaultSyncPowerStateInterval)
	def(&out.PowerFailureRecoveryInterval, DefaultPowerRecoveryInterval)
	def(&out.PowerStateChangeTimeout, DefaultPowerStateChangeTimeout)
	def(&out.IntentPollInterval, DefaultIntentPollInterval)
	def(&out.KeepaliveInterval, DefaultKeepaliveInterval)
	def(&out.MaxConductorWaitStep, DefaultMaxConductorWaitStep)
	if out.PowerStateSyncMaxRetries <= 0 {
		out.PowerStateSyncMaxRetries = DefaultPowerStateSyncRetries
	}
	if out.PeriodicMaxWorkers <= 0 {
		out.PeriodicMaxWorkers = DefaultPeriodicMaxWorkers
	}
	if out.MaxConcurrentDeploy == 0 {
		out.MaxConcurrentDeploy = DefaultMaxConcurrentDeploy
	}
	if out.MaxConcurrentClean == 0 {
		out.MaxConcurrentClean = DefaultMaxConcurrentClean
	}
	if out.BootStageBuffer <= 0 {
		out.BootStageBuffer = DefaultBootStageBuffer
	}
	switch out.RescuePasswordHashAlgorithm {
	case "":
		out.RescuePasswordHashAlgorithm = RescueHashSHA256
	case RescueHashSHA256, RescueHashSHA512:
	default:
		return out, &baremetal.InvalidFieldError{Kind: "conductor", Ident: out.Hostname, Field: "rescue_password_hash_algorithm",
			Expected: fmt.Sprintf("%q or %q, got %q", RescueHashSHA256, RescueHashSHA512, out.RescuePasswordHashAlgorithm)}
	}
	out.Agent = out.Agent.withDefaults()
	return out, nil
}
