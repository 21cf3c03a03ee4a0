package rfdriver

import (
	"log/slog"
	"testing"
)

// TestNilLoggerIsSlogDefault leaves Options.Logger nil: the connection
// logs to slog.Default(), as everywhere an embedder configures logging.
func TestNilLoggerIsSlogDefault(t *testing.T) {
	var o Options
	o.defaults()
	if o.Logger != slog.Default() {
		t.Errorf("nil Logger defaults to %v, want slog.Default()", o.Logger)
	}
	mine := slog.New(slog.DiscardHandler)
	o = Options{Logger: mine}
	o.defaults()
	if o.Logger != mine {
		t.Error("a Logger that was set was replaced")
	}
}
