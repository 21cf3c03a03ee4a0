package baremetal

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"
)

// ErrStoreUnavailable matches the errors IsStoreUnavailable recognises,
// for stores that wrap their own (see StoreUnavailableError).
var ErrStoreUnavailable = errors.New("baremetal: the database is unavailable")

// StoreUnavailableError says a store call failed because the database
// could not be reached or could not write (a dropped connection, a
// refused connection, a full disk): the call may well succeed later, and
// whether a write that failed this way was applied is unknown. It matches
// ErrStoreUnavailable.
type StoreUnavailableError struct {
	// Op is what the store was doing ("releasing node <uuid>").
	Op string
	// Err is the underlying error; it may name the database's user,
	// name, host and port, so it is for logs, never for API clients.
	Err error
}

func (e *StoreUnavailableError) Error() string {
	return "baremetal: " + e.Op + ": the database is unavailable: " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *StoreUnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrStoreUnavailable.
func (e *StoreUnavailableError) Is(target error) bool { return target == ErrStoreUnavailable }

// IsStoreUnavailable reports whether err, returned by a store, means the
// database was out of reach rather than that the call was wrong: a
// StoreUnavailableError, a network error (refused, reset, closed), an
// unexpected end of the connection, a connection the database/sql pool
// found bad, or an error that says so itself with an Unavailable() bool
// method (a store's own driver errors: SQLite's disk full, I/O error and
// read-only database, for example). An error whose Unavailable() says
// false is not, whatever it wraps (unless it wraps a
// StoreUnavailableError): the conductor so marks what a driver call
// returned, whose network failures (a BMC, an agent) are not the
// database's. Context cancellation is not unavailability: the caller
// gave up.
//
// The conductor retries what such errors interrupted (a release, a state
// write) until the database answers again, and never shows their text to
// API clients.
func IsStoreUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrStoreUnavailable) {
		return true
	}
	// An error that says whether it is the database's absence is taken
	// at its word, before guessing from what it wraps: a driver's or an
	// agent's network failure says it is not.
	var u interface{ Unavailable() bool }
	if errors.As(err, &u) {
		return u.Unavailable()
	}
	if errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EROFS) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	// A connection that ends mid-message surfaces as io.EOF wrapped by the
	// driver; a bare io.EOF from a store is nothing else.
	return errors.Is(err, io.EOF)
}
