package baremetal

import (
	"time"

	"github.com/anvilmetal/anvil/statemachine"
)

// Severities of node history entries, as Ironic records them.
const (
	HistoryInfo    = "INFO"
	HistoryWarning = "WARNING"
	HistoryError   = "ERROR"
)

// HistoryEntry is one line of a node's history: what happened, how bad it
// was and which conductor saw it, so operators can follow a node.
type HistoryEntry struct {
	// ID is the store's key, increasing with insertion order.
	ID int64
	// NodeUUID is the node the entry is about.
	NodeUUID string
	// Event names what happened in a few words ("deploy failed",
	// "power state corrected", "reservation broken").
	Event string
	// EventType classifies the event ("provisioning", "power", "console",
	// "maintenance", ...).
	EventType string
	// Message is the full description for operators. It is masked for
	// secrets before it is stored.
	Message string
	// Severity is HistoryInfo, HistoryWarning or HistoryError.
	Severity string
	// Conductor is the hostname of the conductor that recorded it.
	Conductor string
	// User is the caller that asked for the action, if known.
	User string
	// CreatedAt is stamped by the store when empty.
	CreatedAt time.Time
	// State and TargetState are the node's provision state and target
	// provision state once the entry is written (Ironic's state and
	// target_provision_state, API 1.115): for an entry written with an
	// update (RecordingNodeStore), the state the update leaves. The
	// store fills them from the node when State is empty.
	State       statemachine.State
	TargetState statemachine.State
	// Duration is how long the node had been in its provision state when
	// the entry was recorded: CreatedAt less the node's
	// ProvisionUpdatedAt before the write, never negative (Ironic's
	// duration_seconds, API 1.115). For an entry recording a transition
	// it is the time spent in the state the node left. The store fills it
	// when nil, and leaves it nil for a node whose provision state was
	// never stamped.
	Duration *time.Duration
}

// HistoryPage selects one page of a node's history (HistoryStore's
// PageHistory). The zero value is the whole history, oldest first.
type HistoryPage struct {
	// After is the ID of the last entry of the previous page; the page
	// starts after it in the chosen order. Zero starts at the beginning.
	After int64
	// Limit bounds the page; zero or negative means no bound.
	Limit int
	// Descending lists newest first.
	Descending bool
	// ByID orders by ID (insertion order) instead of by CreatedAt; ties
	// of CreatedAt are always broken by ID.
	ByID bool
}
