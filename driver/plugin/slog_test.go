package plugin_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/internal/testlog"
)

// TestSlogLogger logs through the *slog.Logger a plugin's drivers get and
// reads the hclog JSON lines the host re-levels: levels as the host maps
// them back, attributes, groups as dotted keys, the hclog logger's level
// honoured.
func TestSlogLogger(t *testing.T) {
	var out testlog.Buffer
	hl := hclog.New(&hclog.LoggerOptions{Name: "redfish", Level: hclog.Debug, JSONFormat: true, Output: &out})
	l := plugin.SlogLogger(hl)
	if l.Enabled(t.Context(), slog.LevelDebug-4) || !l.Enabled(t.Context(), slog.LevelDebug) {
		t.Error("Enabled does not follow the hclog logger's level (debug)")
	}
	l.Log(t.Context(), slog.LevelDebug-4, "trace line, dropped at debug")
	l.With("bmc", "https://192.0.2.10").WithGroup("req").Debug("session created", "user", "admin",
		slog.Group("retry", "attempt", 2), slog.Attr{})
	l.Info("info line")
	l.Warn("warn line", "error", errors.New("busy"))
	l.Error("error line")
	var lines []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not an hclog JSON line: %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	want := []struct{ level, msg string }{{"debug", "session created"}, {"info", "info line"}, {"warn", "warn line"}, {"error", "error line"}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if lines[i]["@level"] != w.level || lines[i]["@message"] != w.msg || lines[i]["@module"] != "redfish" {
			t.Errorf("line %d = %v, want level %s, message %q, module redfish", i, lines[i], w.level, w.msg)
		}
	}
	first := lines[0]
	if first["bmc"] != "https://192.0.2.10" || first["req.user"] != "admin" || first["req.retry.attempt"] != float64(2) {
		t.Errorf("attributes of %v: want bmc, req.user and req.retry.attempt", first)
	}
	if _, ok := first[""]; ok {
		t.Errorf("an empty attribute was kept: %v", first)
	}
	if lines[2]["error"] != "busy" {
		t.Errorf("error attribute %v, want busy", lines[2]["error"])
	}
}
