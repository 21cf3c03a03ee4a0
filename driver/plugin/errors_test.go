package plugin_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/plugin"
)

// TestBackoffErrorIsNotDriverUnavailable checks that a plugin in restart
// backoff and an implementation missing a host prerequisite are two
// errors an embedder tells apart by type and by sentinel.
func TestBackoffErrorIsNotDriverUnavailable(t *testing.T) {
	cause := errors.New("exec: no such file")
	var backoff error = &plugin.BackoffError{Plugin: "acme", Path: "/p/anvil-driver-acme", Failures: 2, RetryAt: time.Unix(60, 0).UTC(), Err: cause}
	var missing error = &driver.UnavailableError{Kind: driver.KindPower, Impl: "ipmitool", Reason: "ipmitool is not installed"}

	if !errors.Is(backoff, plugin.ErrPluginBackoff) || !errors.Is(backoff, cause) {
		t.Errorf("backoff error does not match ErrPluginBackoff and its cause: %v", backoff)
	}
	if errors.Is(backoff, driver.ErrUnavailable) {
		t.Errorf("backoff error matches driver.ErrUnavailable")
	}
	var due *driver.UnavailableError
	if errors.As(backoff, &due) {
		t.Errorf("backoff error is a *driver.UnavailableError")
	}
	if errors.Is(missing, plugin.ErrPluginBackoff) {
		t.Errorf("driver unavailable error matches ErrPluginBackoff")
	}
	if msg := backoff.Error(); !strings.Contains(msg, "restart backoff") || !strings.Contains(msg, "acme") {
		t.Errorf("backoff message %q does not say restart backoff and the plugin", msg)
	}
}
