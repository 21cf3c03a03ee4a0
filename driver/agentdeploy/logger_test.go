package agentdeploy_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
)

// TestNilLoggerLogsToSlogDefault leaves InspectOptions.Logger nil: the
// hooks' warning (no suitable root disk) reaches slog.Default(), as
// everywhere an embedder configures logging, instead of being discarded.
func TestNilLoggerLogsToSlogDefault(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	in := newInspect(t, agentdeploy.InspectOptions{})
	inv := inventory()
	inv.Disks = []agentclient.InventoryDisk{{Name: "/dev/sda", Size: 3 * gib}}
	task := &driver.Task{NodeUUID: "node-1"}
	if err := in.ContinueInspection(context.Background(), task, driver.InspectionData{Inventory: raw(t, inv)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "no suitable root disk") {
		t.Errorf("slog.Default() got no warning from a nil Logger:\n%s", buf.String())
	}
}
