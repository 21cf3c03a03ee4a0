package ironicapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"
)

// Body budget defaults.
const (
	// DefaultMaxInFlightBodyBytes bounds the bytes of all request bodies
	// a Handler reads at once (Options.MaxInFlightBodyBytes).
	DefaultMaxInFlightBodyBytes = 256 << 20
	// DefaultBodyBudgetWait is how long a request waits for room in the
	// budget before it gets 503 (Options.BodyBudgetWait).
	DefaultBodyBudgetWait = 2 * time.Second
	// agentHeartbeatBodyBytes and agentInspectionBodyBytes are what the
	// ramdisk endpoints' bodies count against the budget when their size
	// is not announced: agentclient's limits (256 KiB for a heartbeat,
	// agentclient.MaxInspectionBodyBytes for inspection data).
	agentHeartbeatBodyBytes  = 256 << 10
	agentInspectionBodyBytes = 4 << 20
	// bodyReadBase and bodyReadRate make a body's read deadline: a
	// client gets bodyReadBase plus one second per bodyReadRate bytes of
	// the endpoint's limit to send it, so a slow body does not hold a
	// connection and its share of the budget for the server's whole read
	// timeout.
	bodyReadBase = 30 * time.Second
	bodyReadRate = 1 << 20
	// budgetRetryAfter is the Retry-After of a 503 for a full budget.
	budgetRetryAfter = 1
	// bodyCost is what one byte of body counts against the budget: a
	// JSON body is held as read, as the raw values the handler keeps,
	// and as the strings they decode to (a 95 MiB provision body was
	// measured at about 330 MiB of resident memory), so the budget
	// bounds memory rather than wire bytes.
	bodyCost = 3
)

// bodyBudget bounds the bytes of the bodies in flight.
type bodyBudget struct {
	sem  *semaphore.Weighted
	max  int64
	wait time.Duration
}

func newBodyBudget(max int64, wait time.Duration) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(max), max: max, wait: wait}
}

// bodyWeight is what a body of r counts against the budget: bodyCost
// times its announced size, or its endpoint's limit when it announces
// none. A body heavier than the whole budget takes all of it.
func bodyWeight(r *http.Request, limit int64) int64 {
	switch {
	case r.Body == nil || r.Body == http.NoBody:
		return 0
	case r.ContentLength >= 0:
		return bodyCost * min(r.ContentLength, limit)
	default:
		return bodyCost * limit
	}
}

// acquire takes n bytes of the budget, waiting at most b.wait; it
// returns the release function, or an *Error (503 with Retry-After)
// when the budget stays full.
func (b *bodyBudget) acquire(ctx context.Context, n int64) (func(), *Error) {
	if n <= 0 {
		return func() {}, nil
	}
	n = min(n, b.max)
	wctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(wctx, n); err != nil {
		return nil, &Error{Status: http.StatusServiceUnavailable, RetryAfter: budgetRetryAfter, Message: fmt.Sprintf(
			"The server is reading too many request bodies at once (%d bytes in flight at most); retry later.", b.max)}
	}
	return func() { b.sem.Release(n) }, nil
}

// tooLarge is the 413 of a body announced or found larger than limit.
func tooLarge(limit int64) *Error {
	return Errorf(http.StatusRequestEntityTooLarge, "Request body is larger than %d bytes.", limit)
}

// setBodyDeadline bounds the time left to read a body of up to limit
// bytes (best effort: a ResponseWriter without deadlines keeps the
// server's read timeout).
func setBodyDeadline(w http.ResponseWriter, r *http.Request, limit int64) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	d := bodyReadBase + time.Duration(limit/bodyReadRate)*time.Second
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
}

// agentBodyLimit is the limit a ramdisk endpoint's body counts with.
func agentBodyLimit(path string) int64 {
	switch {
	case path == "/v1/continue_inspection":
		return agentInspectionBodyBytes
	case strings.HasPrefix(path, "/v1/heartbeat/"):
		return agentHeartbeatBodyBytes
	}
	return 0
}

// serveAgent passes a ramdisk request to Options.Agent within the body
// budget. The agent endpoints are unauthenticated, so their bodies only
// ever count their small limits, and a size announced over them is
// refused before anything is read (by the agent handler itself).
func (h *Handler) serveAgent(w http.ResponseWriter, r *http.Request) {
	limit := agentBodyLimit(r.URL.Path)
	if limit == 0 || r.ContentLength > limit {
		// No body expected (lookup), or refused unread by the agent
		// handler with its own 413.
		h.opts.Agent.ServeHTTP(w, r)
		return
	}
	release, e := h.budget.acquire(r.Context(), bodyWeight(r, limit))
	if e != nil {
		writeError(w, e)
		return
	}
	defer release()
	setBodyDeadline(w, r, limit)
	h.opts.Agent.ServeHTTP(w, r)
}
