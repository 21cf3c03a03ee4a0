package agentclient

import (
	"context"
	"time"

	"github.com/anvilmetal/anvil/statemachine"
)

// Backend is what the lookup and heartbeat handler needs from the rest of
// the system. The conductor engine implements it; agenttest.Backend is an
// in-memory implementation for tests. The handler performs every protocol
// check itself (API version, field shapes, token comparison, TLS, callback
// URL and certificate pinning, lock state) and calls the Backend only to read
// and record node data, so an implementation holds no protocol logic.
//
// Methods must be safe for concurrent use. They receive the request's
// context and should return promptly: the agent waits for the answer.
type Backend interface {
	// LookupNode finds the node an agent belongs to. When q.NodeUUID is set
	// it is the only criterion; otherwise the node owning a port with any of
	// q.Addresses (lower-case, colon-separated MACs) is returned. It returns
	// an error wrapping ErrNodeNotFound when nothing matches. The returned
	// Node is a copy the handler may read freely.
	LookupNode(ctx context.Context, q LookupQuery) (Node, error)

	// GetNode returns the node named by ident, a UUID or a node name, for a
	// heartbeat. It returns an error wrapping ErrNodeNotFound when there is
	// no such node.
	GetNode(ctx context.Context, ident string) (Node, error)

	// EnsureAgentToken stores candidate as the node's agent token when the
	// node has none, and reports whether it did. When a token already
	// exists it must not be replaced and created is false; the handler then
	// answers with the masked value. The one exception is a token the
	// implementation knows reached no agent: one it wrote for an earlier
	// lookup that got an error instead of the token (the write's outcome
	// was lost to a database outage), which it may replace with
	// candidate. Ironic takes the node's exclusive lock
	// for this without retrying, so when the node is reserved by someone
	// else the method returns an error wrapping ErrNodeLocked and the agent
	// backs off. The candidate is a secret: never log it.
	EnsureAgentToken(ctx context.Context, nodeUUID, candidate string) (created bool, err error)

	// RecordHeartbeat hands over a heartbeat that passed every check. The
	// implementation records it and schedules the processing Ironic's
	// HeartbeatMixin does (step continuation and so on) without waiting for
	// that processing: the handler answers 202 as soon as this returns. An
	// error wrapping ErrNodeLocked becomes 409, ErrNodeNotFound becomes 404,
	// anything else 500.
	RecordHeartbeat(ctx context.Context, hb Heartbeat) error
}

// LookupQuery is what an agent looks itself up by.
type LookupQuery struct {
	// Addresses are the valid MAC addresses the agent sent, normalised to
	// lower case with colons, each once, in the order it sent them; at
	// most HandlerConfig.MaxLookupAddresses.
	Addresses []string
	// NodeUUID is the node UUID the agent sent, normalised to lower case,
	// or empty.
	NodeUUID string
}

// Node is the handler's view of a node: what lookup returns to the agent and
// what heartbeat checks run against. Maps are read only.
type Node struct {
	UUID string
	Name string
	// ProvisionState is the node's provision state, e.g.
	// statemachine.CleanWait ("clean wait").
	ProvisionState statemachine.State
	// Reservation names the conductor holding the node's exclusive lock, or
	// is empty.
	Reservation string
	// FastTrack reports whether fast track is enabled for the node
	// (driver_info fast_track, else the deploy default). It widens the
	// states in which lookup is allowed.
	FastTrack bool
	// ManagementInterface is the node's management interface name; for
	// redfish and idrac-redfish the agent is told to skip BMC detection.
	ManagementInterface string

	Properties         map[string]any
	InstanceInfo       map[string]any
	DriverInternalInfo map[string]any

	// AgentToken is the stored driver_internal_info.agent_secret_token, or
	// empty when none exists. It is a secret, compared in constant time and
	// never echoed.
	AgentToken string
	// AgentURL is the recorded driver_internal_info.agent_url, or empty.
	AgentURL string
	// AgentVerifyCA is the PEM certificate pinned from an earlier
	// heartbeat, or empty.
	AgentVerifyCA string
}

// Heartbeat is an accepted heartbeat, ready to be recorded.
type Heartbeat struct {
	// NodeUUID is the UUID of the node the heartbeat is for (resolved from
	// the name or UUID in the URL).
	NodeUUID string
	// CallbackURL is the agent's base URL, e.g. https://10.0.0.5:9999.
	CallbackURL string
	// AgentVersion is the IPA version string, possibly empty when
	// AgentStatus is set.
	AgentVersion string
	// AgentVerifyCA is the agent's PEM certificate for auto-TLS, or empty.
	// When set it is to be pinned in driver_internal_info.agent_verify_ca.
	AgentVerifyCA string
	// AgentStatus and AgentStatusMessage come from anaconda-style agents
	// ("start", "end" or "error").
	AgentStatus        string
	AgentStatusMessage string
	// ReceivedAt is when the handler accepted the heartbeat (UTC); Ironic
	// stores it as agent_last_heartbeat.
	ReceivedAt time.Time
	// AgentToken is the token the heartbeat carried, which the handler
	// found equal to the node's. A backend that processes heartbeats
	// later (queued for a worker) checks it again under the node's lock,
	// as Ironic's conductor does: a heartbeat of the node's previous boot,
	// accepted just before a power action wiped that boot's token, must
	// not pin the previous boot's URL and certificate. A secret: never
	// logged.
	AgentToken string
}

// LastHeartbeatLayout is the layout of driver_internal_info
// agent_last_heartbeat, the timestamp format Ironic writes.
const LastHeartbeatLayout = "2006-01-02T15:04:05.000000"
