package ironicapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
)

// Error is an API error: the HTTP status and the message Ironic puts in
// faultstring. RetryAfter, when positive, becomes a Retry-After header
// (seconds).
type Error struct {
	Status     int
	Message    string
	RetryAfter int
	// internal marks a 500 made from an error the API does not know,
	// whose text (a database's user, name, host and port, a driver's
	// internals) is for the log only: the client gets
	// genericServerError.
	internal bool
	// detail is the text of the library error the message was made from
	// (publicMessage), with its wrapping, for the log.
	detail string
}

// genericServerError is the faultstring of a 500 whose cause is
// internal: Ironic's generic exception text, with the request's id
// (X-OpenStack-Request-Id), under which the log has the detail.
const genericServerError = "An unknown exception occurred. Request ID: %s"

func (e *Error) Error() string { return e.Message }

// Errorf makes an *Error with status and a formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

func notFound(format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, format, args...)
}

// notAcceptableField is Ironic's answer to a field or parameter the
// request's microversion does not have.
func notAcceptable(format string, args ...any) *Error {
	return Errorf(http.StatusNotAcceptable, format, args...)
}

// lockRetryAfter is the Retry-After, in seconds, sent with a 409 for a
// locked node: a conductor holds a node for the length of one operation
// step, and clients (gophercloud, ironicclient) retry a 409 anyway.
const lockRetryAfter = 2

// toError maps an error from the conductor, the store or a driver to the
// status code Ironic gives the same condition, and to Ironic's wording of
// it (publicMessage); detail keeps the library's text for the log.
func toError(err error) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	if baremetal.IsStoreUnavailable(err) {
		return &Error{Status: http.StatusInternalServerError, Message: err.Error(), internal: true}
	}
	msg := publicMessage(err)
	var (
		locked  *baremetal.NodeLockedError
		limit   *conductor.ConcurrentActionLimitError
		missing *driver.MissingParameterError
		invalid *driver.InvalidParameterError
		unsupp  *driver.UnsupportedError
	)
	switch {
	case errors.As(err, &locked):
		return &Error{Status: http.StatusConflict, RetryAfter: lockRetryAfter, detail: err.Error(), Message: fmt.Sprintf(
			"Node %s is locked by host %s, please retry after the current operation is completed.", locked.Node, locked.Holder)}
	case errors.As(err, &limit):
		return &Error{Status: http.StatusServiceUnavailable, Message: msg, RetryAfter: 1, detail: err.Error()}
	case errors.Is(err, baremetal.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Message: msg, detail: err.Error()}
	case errors.Is(err, conductor.ErrNodeProtected):
		return &Error{Status: http.StatusForbidden, Message: msg, detail: err.Error()}
	case errors.Is(err, baremetal.ErrDuplicate), errors.Is(err, baremetal.ErrConflict),
		errors.Is(err, baremetal.ErrNodeInUse), errors.Is(err, conductor.ErrUpdateInProgress),
		errors.Is(err, conductor.ErrDeleteRefused):
		return &Error{Status: http.StatusConflict, Message: msg, detail: err.Error()}
	case errors.Is(err, baremetal.ErrInvalidInput), errors.Is(err, conductor.ErrVerbRefused),
		errors.As(err, &missing), errors.As(err, &invalid), errors.As(err, &unsupp),
		errors.Is(err, driver.ErrHardwareTypeNotFound), errors.Is(err, driver.ErrInterfaceNotFound),
		errors.Is(err, driver.ErrIncompatibleInterface), errors.Is(err, driver.ErrNoValidDefault),
		errors.Is(err, baremetal.ErrPortgroupNotEmpty), errors.Is(err, baremetal.ErrChassisNotEmpty):
		return &Error{Status: http.StatusBadRequest, Message: msg, detail: err.Error()}
	case errors.Is(err, conductor.ErrNoConductor), errors.Is(err, conductor.ErrConductorNotRunning):
		return &Error{Status: http.StatusServiceUnavailable, Message: msg, detail: err.Error()}
	}
	return &Error{Status: http.StatusInternalServerError, Message: err.Error(), internal: true}
}

// writeError writes Ironic's error body: {"error_message": "<JSON text of
// {faultcode, faultstring, debuginfo}>"}, the inner document a string.
func writeError(w http.ResponseWriter, e *Error) {
	code := "Client"
	if e.Status >= 500 {
		code = "Server"
	}
	inner, _ := json.Marshal(struct {
		FaultCode   string  `json:"faultcode"`
		FaultString string  `json:"faultstring"`
		DebugInfo   *string `json:"debuginfo"`
	}{code, baremetal.MaskText(e.Message), nil})
	body, _ := json.Marshal(map[string]string{"error_message": string(inner)})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}
