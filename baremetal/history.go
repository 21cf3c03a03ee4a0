package baremetal

import "time"

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
}
