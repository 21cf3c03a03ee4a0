package clusterlab

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
)

// refusalHeader carries, in a refused answer of the control API, the name
// of the sentinel error the conductor's refusal matched: the body is only
// text, and callers branch on the sentinel, never on the text.
const refusalHeader = "Anvil-Lab-Refusal"

// reasonActionLimit is the refusal of a verb over a concurrent action
// limit (conductor.ErrConcurrentActionLimit).
const reasonActionLimit = "concurrent-action-limit"

// refusals maps each sentinel a verb's error may match to the HTTP status
// and the refusalHeader value the control API answers with; the first
// match wins. An error matching none is a 500 with no reason.
var refusals = []struct {
	sentinel error
	status   int
	reason   string
}{
	{baremetal.ErrNodeLocked, http.StatusConflict, "node-locked"},
	{statemachine.ErrInvalidTransition, http.StatusConflict, "invalid-transition"},
	{conductor.ErrVerbRefused, http.StatusConflict, "verb-refused"},
	{conductor.ErrUpdateInProgress, http.StatusConflict, "update-in-progress"},
	{conductor.ErrConcurrentActionLimit, http.StatusServiceUnavailable, reasonActionLimit},
	{conductor.ErrNoConductor, http.StatusServiceUnavailable, "no-conductor"},
	{conductor.ErrConductorNotRunning, http.StatusServiceUnavailable, "conductor-not-running"},
}

// refusalOf returns the status and reason the control API answers a
// verb's non-nil err with.
func refusalOf(err error) (status int, reason string) {
	for _, r := range refusals {
		if errors.Is(err, r.sentinel) {
			return r.status, r.reason
		}
	}
	return http.StatusInternalServerError, ""
}

// answerVerb writes the control API's answer to a verb that returned err.
func answerVerb(w http.ResponseWriter, err error) {
	if err == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	status, reason := refusalOf(err)
	if reason != "" {
		w.Header().Set(refusalHeader, reason)
	}
	if reason == reasonActionLimit {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, err.Error(), status)
}

// VerbError is a verb the control API did not accept: which node and
// verb, the last answer's status and text, and the sentinel its reason
// names, which it matches with errors.Is (for example
// conductor.ErrConcurrentActionLimit).
type VerbError struct {
	Node, Verb string
	// Status is the last HTTP status, 0 when no conductor answered.
	Status int
	// Message is the last answer's text, or the transport error.
	Message string
	// Reason is the last answer's refusalHeader ("" for none).
	Reason string
	// Budget is set when the client gave up retrying after it.
	Budget string
}

// Error names the node, the verb and the last answer.
func (e *VerbError) Error() string {
	if e.Budget != "" {
		return fmt.Sprintf("clusterlab: %s of %s not accepted within %s: %s", e.Verb, e.Node, e.Budget, e.Message)
	}
	return fmt.Sprintf("clusterlab: %s of %s: %s", e.Verb, e.Node, e.Message)
}

// Is matches the sentinel the answer's reason names.
func (e *VerbError) Is(target error) bool {
	for _, r := range refusals {
		if r.reason == e.Reason && e.Reason != "" {
			return target == r.sentinel
		}
	}
	return false
}
