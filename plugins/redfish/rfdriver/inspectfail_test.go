package rfdriver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// sushyLike strips what sushy-tools' fake driver does not report: the
// memory size and the processors.
func sushyLike(s *redfishtest.Server, id string) {
	s.Mutate(redfishtest.SystemPath(id), func(m map[string]any) {
		delete(m["MemorySummary"].(map[string]any), "TotalSystemMemoryGiB")
		delete(m, "Processors")
	})
}

// TestFailedInspectionChangesNothing inspects a system that reports no
// memory size and no processors (as sushy-tools' fake systems): the
// inspection fails naming memory_mb and cpu_arch and records no property,
// port or warning.
func TestFailedInspectionChangesNothing(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	sushyLike(s, redfishtest.SystemID)
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	tk.Properties = map[string]any{"memory_mb": "1024", "capabilities": "x:y"}
	tk.Ports = []driver.Port{{UUID: "p1", Address: "52:54:00:00:00:01"}}
	tk.DriverInternalInfo = map[string]any{driver.IdentityKey: "redfish-uuid:" + s.Resource(redfishtest.SystemPath(redfishtest.SystemID))["UUID"].(string)}
	_, err := d.Inspect().InspectHardware(ctx, tk)
	if !errors.Is(err, ErrInspection) || !strings.Contains(err.Error(), "memory_mb, cpu_arch") {
		t.Fatalf("want an inspection error naming memory_mb and cpu_arch, got %v", err)
	}
	if ch := tk.Changes(); !ch.Empty() {
		t.Fatalf("a failed inspection changed the node: %+v", ch)
	}
}

// TestUnknownRedfishKeyIsAWarning checks that a misspelt redfish_* key is
// reported as a validation warning naming it, while validation passes
// and known keys (of every redfish interface) are not reported.
func TestUnknownRedfishKeyIsAWarning(t *testing.T) {
	d := newDrivers(t)
	impls := map[driver.Kind]driver.Implementation{}
	for _, i := range d.Bundle().Implementations {
		if i.Kind != driver.KindBoot || i.Name == ImplVirtualMedia {
			impls[i.Kind] = i
		}
	}
	drv, err := driver.NewDriver(HardwareType, impls)
	if err != nil {
		t.Fatal(err)
	}
	tk := &driver.Task{NodeUUID: "n1", HardwareType: HardwareType, DriverInfo: map[string]any{
		"redfish_address": "https://bmc", "redfish_frobnicate": "yes", "redfish_deploy_iso": "http://images.example/ipa.iso",
		"redfish_system_id": "1", "deploy_kernel": "http://k",
	}}
	for k, err := range drv.Validate(context.Background(), tk) {
		if err != nil && !errors.Is(err, driver.ErrUnsupported) {
			t.Fatalf("%s: %v", k, err)
		}
	}
	ws := drv.ValidationWarnings(tk)
	if len(ws) != 1 || ws[0].Key != "redfish_frobnicate" || !strings.Contains(ws[0].String(), "redfish_frobnicate") {
		t.Fatalf("warnings %+v, want one naming redfish_frobnicate", ws)
	}
}
