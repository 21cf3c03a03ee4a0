package plugin

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of the plugin host.
var (
	// ErrPluginCrashed means the plugin process exited or crashed while
	// serving a call; the call failed and the plugin will be restarted on
	// next use.
	ErrPluginCrashed = errors.New("plugin crashed")
	// ErrPluginBackoff means the plugin process is not running and is in
	// restart backoff: it crashed or failed to start, and the next start
	// is not due yet. The call was not attempted. It is unrelated to
	// driver.ErrUnavailable (a prerequisite missing on the host).
	ErrPluginBackoff = errors.New("plugin in restart backoff")
	// ErrProtocolVersion means the plugin speaks no protocol version the
	// host accepts.
	ErrProtocolVersion = errors.New("unsupported plugin protocol version")
	// ErrChecksumMismatch means a plugin binary does not have its pinned
	// SHA-256.
	ErrChecksumMismatch = errors.New("plugin checksum mismatch")
	// ErrHostClosed means the host was closed.
	ErrHostClosed = errors.New("plugin host closed")
	// ErrNotAPlugin means a file named like a plugin is not a usable plugin
	// executable (not a regular file, not executable, no answer).
	ErrNotAPlugin = errors.New("not a driver plugin")
)

// CrashError says a plugin process died while serving a call.
type CrashError struct {
	Plugin    string
	Path      string
	Operation string // "power/fake get_power_state"
	Err       error  // the transport error
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("plugin %s (%s): crashed during %s: %v", e.Plugin, e.Path, e.Operation, e.Err)
}

// Is matches ErrPluginCrashed.
func (e *CrashError) Is(target error) bool { return target == ErrPluginCrashed }

// Unwrap returns the transport error.
func (e *CrashError) Unwrap() error { return e.Err }

// BackoffError says a plugin process is not running, is in restart
// backoff, and when the next start will be attempted. It is not a
// *driver.UnavailableError, which says that an implementation lacks a
// prerequisite on its host; a BackoffError goes away by itself.
type BackoffError struct {
	Plugin   string
	Path     string
	Failures int       // consecutive failures
	RetryAt  time.Time // when the next start will be attempted
	Err      error     // the last failure
}

func (e *BackoffError) Error() string {
	return fmt.Sprintf("plugin %s (%s): in restart backoff after %d consecutive failures, next start at %s: %v",
		e.Plugin, e.Path, e.Failures, e.RetryAt.Format(time.RFC3339Nano), e.Err)
}

// Is matches ErrPluginBackoff.
func (e *BackoffError) Is(target error) bool { return target == ErrPluginBackoff }

// Unwrap returns the last failure.
func (e *BackoffError) Unwrap() error { return e.Err }

// ProtocolVersionError says a plugin and the host share no protocol
// version, and lists both.
type ProtocolVersionError struct {
	Plugin         string
	Path           string
	HostVersions   []int
	PluginVersions []int // nil when the plugin could not say
}

func (e *ProtocolVersionError) Error() string {
	pv := "unknown"
	if e.PluginVersions != nil {
		pv = fmt.Sprint(e.PluginVersions)
	}
	return fmt.Sprintf("plugin %s (%s): no common protocol version: host accepts %v, plugin speaks %s",
		e.Plugin, e.Path, e.HostVersions, pv)
}

// Is matches ErrProtocolVersion.
func (e *ProtocolVersionError) Is(target error) bool { return target == ErrProtocolVersion }

// ChecksumError says a plugin binary does not match its pinned SHA-256.
type ChecksumError struct {
	Path string
	Want string
	Got  string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("plugin %s: sha256 is %s, pinned %s", e.Path, e.Got, e.Want)
}

// Is matches ErrChecksumMismatch.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksumMismatch }

// DiscoveryError says why one plugin file was skipped.
type DiscoveryError struct {
	Path string
	Err  error
}

func (e *DiscoveryError) Error() string { return fmt.Sprintf("plugin %s: skipped: %v", e.Path, e.Err) }

// Unwrap returns the reason.
func (e *DiscoveryError) Unwrap() error { return e.Err }
