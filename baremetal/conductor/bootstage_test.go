package conductor_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"

	"github.com/anvilmetal/anvil/netboot/netboottest"
)

// newNetbootClockHarness runs a conductor on a fake clock whose
// fake-hardware nodes boot with the ipxe interface (writing into the
// returned store) and deploy with direct, but whose machines never boot
// (fake power), so every ramdisk boot waits until a check fails it.
func newNetbootClockHarness(t *testing.T, opts conductor.Options) (*harness, *storetest.ManualClock, *netboottest.Store) {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {fake.Name, agentdeploy.Name}, driver.KindBoot: {fake.Name, pxe.NameIPXE}}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
		t.Fatal(err)
	}
	configs := netboottest.NewStore()
	reg.MustRegister(pxe.New(configs, pxe.Options{}).Bundle())
	opts.Hostname = "netboot-clock"
	clock := newFakeClock()
	return launchOnClock(t, clock, reg, opts), clock, configs
}

// netbootNode enrolls a manageable fake-hardware node that boots with
// ipxe from a pxe-enabled port.
func (h *harness) netbootNode(name, mac string) *baremetal.Node {
	h.t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name,
		BootInterface: pxe.NameIPXE,
		DriverInfo:    map[string]any{"deploy_kernel": "http://192.0.2.1/ipa.kernel", "deploy_ramdisk": "http://192.0.2.1/ipa.initramfs"},
		InstanceInfo:  map[string]any{"image_source": "http://images.example/img", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	h.must(err)
	h.must(h.store.CreatePort(h.ctx, &baremetal.Port{NodeUUID: n.UUID, Address: mac, PXEEnabled: true}))
	h.must(h.c.Manage(h.ctx, n.UUID))
	return h.waitFor(n.UUID, statemachine.Manageable)
}

// netbootCleanWait enrolls a node as netbootNode does, provides it and
// waits until its clean ramdisk boot is prepared: the node in clean wait,
// stage.Prepared in its history.
func (h *harness) netbootCleanWait(name, mac string) *baremetal.Node {
	h.t.Helper()
	n := h.netbootNode(name, mac)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.CleanWait)
	h.waitHistory(n.UUID, string(stage.Prepared))
	return n
}

// waitHistory waits until the node's history has an entry of event.
func (h *harness) waitHistory(uuid, event string) *baremetal.HistoryEntry {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hist, err := h.store.ListHistory(h.ctx, uuid, 0)
		h.must(err)
		for _, e := range hist {
			if e.Event == event {
				return e
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s: no %q history entry", uuid, event)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestBootStallFailsCleanWaitEarly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, bootStallFailsCleanWaitEarly)
}

func bootStallFailsCleanWaitEarly(t *testing.T) {
	h, clock, configs := newNetbootClockHarness(t, conductor.Options{})
	n := h.netbootCleanWait("stall-1", "52:54:00:00:51:01")
	if c, ok := configs.Config(n.UUID); !ok || c.Purpose != "clean" {
		t.Fatalf("no clean ramdisk configuration: %+v", c)
	}
	prepared := h.waitHistory(n.UUID, string(stage.Prepared))
	if prepared.EventType != stage.EventType {
		t.Errorf("boot prepared entry has type %q", prepared.EventType)
	}
	t0 := clock.Now()
	h.c.ObserveBootStage(stage.Record{Node: n.UUID, MAC: "52:54:00:00:51:01", Stage: stage.DHCPOffer, Addr: "192.0.2.23", At: t0.Add(3 * time.Second)})
	h.c.ObserveBootStage(stage.Record{Node: n.UUID, MAC: "52:54:00:00:51:01", Stage: stage.TFTPSent, File: "undionly.kpxe", At: t0.Add(4 * time.Second)})
	h.waitHistory(n.UUID, string(stage.TFTPSent))

	clock.Advance(4 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	if got, _ := h.store.GetNode(h.ctx, n.UUID); got.ProvisionState != statemachine.CleanWait {
		t.Fatalf("within the fetch deadline: %s, want still clean wait", got.ProvisionState)
	}
	clock.Advance(2 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	want := "Timeout reached while cleaning the node " + n.UUID + ". Please check if the ramdisk responsible for the cleaning is running on the node.: boot stalled: " +
		"boot configuration written at 03:04:05, DHCP offered 192.0.2.23 at 03:04:08, TFTP undionly.kpxe sent at 03:04:09, no boot script or kernel request in 300 s"
	if f.LastError != want {
		t.Fatalf("last error:\n got %q\nwant %q", f.LastError, want)
	}
	if f.TargetProvisionState != statemachine.Available {
		t.Errorf("target %q, want available (as the callback timeout leaves it)", f.TargetProvisionState)
	}
}

func TestBootStallWithoutDHCPFailsDeployWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, bootStallWithoutDHCP)
}

func bootStallWithoutDHCP(t *testing.T) {
	h, clock, _ := newNetbootClockHarness(t, conductor.Options{BootStageDeadlines: stage.Deadlines{DHCP: 2 * time.Minute}})
	n := h.netbootNode("stall-2", "52:54:00:00:51:02")
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.AutomatedClean = new(false); return nil }))
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.DeployWait)
	h.waitHistory(n.UUID, string(stage.Prepared))
	clock.Advance(2 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.DeployFailed)
	if !strings.HasPrefix(f.LastError, "Timeout reached while waiting for callback for node "+n.UUID+": boot stalled: boot configuration written at ") ||
		!strings.Contains(f.LastError, "no DHCP request in 120 s") {
		t.Fatalf("last error %q", f.LastError)
	}
}

func TestLookupWithoutHeartbeatStalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, lookupWithoutHeartbeatStalls)
}

func lookupWithoutHeartbeatStalls(t *testing.T) {
	h, clock, _ := newNetbootClockHarness(t, conductor.Options{})
	n := h.netbootCleanWait("stall-3", "52:54:00:00:51:03")
	// The agent looks the node up; the stall check now waits for its
	// first heartbeat.
	if _, err := h.c.AgentBackend().LookupNode(h.ctx, agentclient.LookupQuery{Addresses: []string{"52:54:00:00:51:03"}}); err != nil {
		t.Fatal(err)
	}
	lookup := h.waitHistory(n.UUID, string(stage.AgentLookup))
	if lookup.Message != "agent lookup from 52:54:00:00:51:03" {
		t.Errorf("lookup message %q", lookup.Message)
	}
	clock.Advance(stage.DefaultHeartbeat + time.Second)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.HasSuffix(f.LastError, "agent lookup from 52:54:00:00:51:03 at 03:04:05, no agent heartbeat in 300 s") {
		t.Fatalf("last error %q", f.LastError)
	}
}

func TestCallbackTimeoutNamesTheLastBootStage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, callbackTimeoutNamesLastStage)
}

func callbackTimeoutNamesLastStage(t *testing.T) {
	off := stage.Deadlines{DHCP: -1, Fetch: -1, Agent: -1, Heartbeat: -1}
	h, clock, _ := newNetbootClockHarness(t, conductor.Options{BootStageDeadlines: off})
	n := h.netbootCleanWait("stall-4", "52:54:00:00:51:04")
	h.c.ObserveBootStage(stage.Record{Node: n.UUID, Stage: stage.DHCPOffer, Addr: "192.0.2.24", At: clock.Now().Add(time.Second)})
	h.waitHistory(n.UUID, string(stage.DHCPOffer))
	clock.Advance(29 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	if got, _ := h.store.GetNode(h.ctx, n.UUID); got.ProvisionState != statemachine.CleanWait {
		t.Fatalf("stall checks disabled, yet the node is %s", got.ProvisionState)
	}
	clock.Advance(2 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	want := "Timeout reached while cleaning the node " + n.UUID + ". Please check if the ramdisk responsible for the cleaning is running on the node., " +
		"last boot stage: DHCP offered 192.0.2.24 at 03:04:06 (boot stages: boot configuration written at 03:04:05, DHCP offered 192.0.2.24 at 03:04:06)"
	if f.LastError != want {
		t.Fatalf("last error:\n got %q\nwant %q", f.LastError, want)
	}
}

func TestBootStagesLandInHistoryAndWatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{})
	n := h.enroll("stages-1", nil)
	events := h.c.Watch(h.ctx, conductor.WatchFilter{Types: []conductor.EventType{conductor.EventBootStage}})
	at := time.Date(2026, 12, 1, 10, 42, 3, 0, time.UTC)
	// A machine nobody configured is only logged, and the boot server's
	// own "boot prepared" is not repeated (the conductor writes its own).
	h.c.ObserveBootStage(stage.Record{MAC: "52:54:00:99:99:99", Stage: stage.Fallback, At: at})
	h.c.ObserveBootStage(stage.Record{Node: n.UUID, Stage: stage.Prepared, At: at})
	r := stage.Record{Node: n.UUID, MAC: "52:54:00:12:34:56", Stage: stage.DHCPOffer, Addr: "192.0.2.23", File: "undionly.kpxe", At: at}
	h.c.ObserveBootStage(r)
	select {
	case e := <-events:
		if e.NodeUUID != n.UUID || e.BootStage != stage.DHCPOffer || e.Detail != r.Phrase() || !e.Time.Equal(at) {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no boot stage event")
	}
	e := h.waitHistory(n.UUID, string(stage.DHCPOffer))
	if e.EventType != stage.EventType || e.Message != "DHCP offered 192.0.2.23, boot file undionly.kpxe" || !e.CreatedAt.Equal(at) || e.Severity != baremetal.HistoryInfo {
		t.Fatalf("history entry %+v", e)
	}
	hist, err := h.c.Store().ListHistory(h.ctx, n.UUID, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if e.Event == string(stage.Prepared) {
			t.Fatalf("the boot server's prepared record reached the history: %+v", e)
		}
	}
}

func TestBootStagesDroppedWhenTheQueueIsFull(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "boot-queue", BootStageBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	pr := prometheus.NewRegistry()
	pr.MustRegister(c.Metrics())
	n := &baremetal.Node{Name: "boot-queue-1", Driver: builtin.FakeHardware}
	if err := store.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	// Not yet running: the queue fills and then drops, never blocks.
	for range 10 {
		c.ObserveBootStage(stage.Record{Node: n.UUID, Stage: stage.DHCPDiscover, MAC: "52:54:00:00:00:01"})
	}
	labels := map[string]string{"conductor": "boot-queue"}
	if m := metricValue(t, pr, "anvil_conductor_boot_stages_dropped_total", labels); m != 6 {
		t.Fatalf("dropped = %v, want 6", m)
	}
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	// Stop drained the queue; after it, records are dropped.
	hist, err := store.ListHistory(context.Background(), n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	recorded := 0
	for _, e := range hist {
		if e.EventType == stage.EventType && e.Event == string(stage.DHCPDiscover) {
			recorded++
		}
	}
	if recorded != 4 {
		t.Errorf("recorded = %v, want the 4 queued", recorded)
	}
	c.ObserveBootStage(stage.Record{Stage: stage.DHCPDiscover})
	if m := metricValue(t, pr, "anvil_conductor_boot_stages_dropped_total", labels); m != 7 {
		t.Errorf("dropped after Stop = %v, want 7", m)
	}
}

func TestNodeForMAC(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{})
	n := h.enroll("resolver-1", nil)
	h.must(h.store.CreatePort(h.ctx, &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:AB:CD:01", PXEEnabled: true}))
	h.must(h.store.CreatePort(h.ctx, &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:ab:cd:02"}))
	for _, tc := range []struct {
		mac   string
		found bool
	}{
		{"52:54:00:ab:cd:01", true},
		{"52-54-00-AB-CD-01", true},
		{"52:54:00:ab:cd:02", false}, // not pxe-enabled
		{"52:54:00:ab:cd:03", false},
		{"not a mac", false},
		{"", false},
	} {
		node, found, err := h.c.NodeForMAC(h.ctx, tc.mac)
		if err != nil || found != tc.found || (found && node != n.UUID) {
			t.Errorf("NodeForMAC(%q) = %q, %v, %v; want found %v", tc.mac, node, found, err, tc.found)
		}
	}
}

func TestNoStallCheckWhereTheCallbackTimeoutIsDisabled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, noStallCheckWithoutTimeout)
}

func noStallCheckWithoutTimeout(t *testing.T) {
	h, clock, _ := newNetbootClockHarness(t, conductor.Options{CleanCallbackTimeout: -1})
	n := h.netbootCleanWait("stall-5", "52:54:00:00:51:05")
	clock.Advance(stage.DefaultDHCP + time.Minute)
	h.c.CheckTimeouts(h.ctx)
	if got, _ := h.store.GetNode(h.ctx, n.UUID); got.ProvisionState != statemachine.CleanWait {
		t.Fatalf("clean callback timeout disabled, yet the stalled boot left the node %s (%s)", got.ProvisionState, got.LastError)
	}
}

func TestBootStallReadsTheNewestAttempt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, bootStallReadsNewestAttempt)
}

// The stall check reads a bounded part of the history: the newest
// entries (ListHistory's limit), so a long earlier attempt does not hide
// the current one.
func bootStallReadsNewestAttempt(t *testing.T) {
	h, clock, _ := newNetbootClockHarness(t, conductor.Options{})
	n := h.netbootNode("stall-6", "52:54:00:00:51:06")
	// An earlier attempt whose firmware looped on DHCP, longer than the
	// part of the history the check reads.
	old := []string{string(stage.Prepared)}
	for range 300 {
		old = append(old, string(stage.DHCPDiscover))
	}
	for _, ev := range old {
		h.must(h.store.AddHistory(h.ctx, &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: ev, EventType: stage.EventType, Severity: baremetal.HistoryInfo}))
	}
	clock.Advance(time.Hour)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.CleanWait)
	h.waitHistory(n.UUID, string(stage.Prepared))
	clock.Advance(stage.DefaultDHCP + time.Second)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.HasSuffix(f.LastError, ": boot stalled: boot configuration written at 04:04:05, no DHCP request in 600 s") {
		t.Fatalf("last error %q, want the stall of the attempt begun at 04:04:05", f.LastError)
	}
}
