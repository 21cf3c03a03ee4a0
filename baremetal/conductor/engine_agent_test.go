package conductor_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

type agentHarness struct {
	*harness
	fleet *simfleet.Fleet
	// apiURL is where the agent API handler is served.
	apiURL string
}

// newAgentHarness runs a conductor whose nodes deploy with the direct
// interface and boot simulated agents over real HTTP.
func newAgentHarness(t *testing.T, opts conductor.Options, agent func(string) *agenttest.Agent) *agentHarness {
	t.Helper()
	return newAgentHarnessWith(t, opts, conductor.AgentSettings{}, agent)
}

func newAgentHarnessWith(t *testing.T, opts conductor.Options, settings conductor.AgentSettings, agent func(string) *agenttest.Agent) *agentHarness {
	t.Helper()
	return newAgentHarnessFleet(t, opts, settings, simfleet.Config{Agent: agent})
}

// newAgentHarnessFleet is newAgentHarnessWith with the simulated fleet
// configured by fc (its APIURL is filled in). The agent (in-band) inspect
// interface is registered too, and settings.APIURL defaults to the agent
// API's URL.
func newAgentHarnessFleet(t *testing.T, opts conductor.Options, settings conductor.AgentSettings, fc simfleet.Config, deploy ...agentdeploy.Options) *agentHarness {
	t.Helper()
	store := openStore(t, false)
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy:  {agentdeploy.Name, fake.Name, agentdeploy.CustomAgentName, agentdeploy.RamdiskName, agentdeploy.AutodetectName},
			driver.KindPower:   {simfleet.PowerName, fake.Name},
			driver.KindInspect: {fake.Name, agentdeploy.InspectName},
			driver.KindRAID:    {fake.Name, driver.NoRAID, agentdeploy.RAIDName},
			driver.KindRescue:  {fake.Name, driver.NoRescue, agentdeploy.RescueName},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	var do agentdeploy.Options
	if len(deploy) > 0 {
		do = deploy[0]
	}
	if do.DefaultBootMode == "" {
		// The harness's machines boot BIOS: a whole-disk image needs no
		// install_bootloader (whose polling would add 6 s to every
		// deploy); agentdeploy's tests cover UEFI and partition images.
		do.DefaultBootMode = netboot.BIOS
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.NewWithOptions(client, do)); err != nil {
		t.Fatal(err)
	}
	for name, impl := range map[string]driver.Interface{
		agentdeploy.CustomAgentName: agentdeploy.NewCustomAgent(client),
		agentdeploy.RamdiskName:     agentdeploy.NewRamdisk(),
		agentdeploy.AutodetectName: agentdeploy.NewAutodetect(agentdeploy.DefaultAutodetectCandidates(), func(n string) driver.Interface {
			impl, _ := reg.Interface(driver.KindDeploy, n)
			return impl
		}),
	} {
		if err := reg.RegisterInterface(driver.KindDeploy, name, impl); err != nil {
			t.Fatal(err)
		}
	}
	inspect, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, inspect); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindRAID, agentdeploy.RAIDName, agentdeploy.NewRAID()); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindRescue, agentdeploy.RescueName, agentdeploy.NewRescue()); err != nil {
		t.Fatal(err)
	}
	// The listener is bound before the conductor exists (the fleet needs
	// its URL, the conductor needs the fleet's power interface); it is
	// served once the conductor's handler exists, and connections made
	// before then wait in the backlog.
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	apiURL := "http://" + api.Listener.Addr().String()
	fc.APIURL = apiURL
	if fc.Logger == nil {
		fc.Logger = testLogger(t)
	}
	fleet, err := simfleet.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if opts.Hostname == "" {
		opts.Hostname = "agent-conductor"
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	settings.Client = client
	if settings.APIURL == "" {
		settings.APIURL = apiURL
	}
	opts.Agent = settings
	c, err := conductor.New(store, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := serveAgentAPI(t, api, c)
	return &agentHarness{harness: &harness{t: t, store: store, c: c, ctx: ctx}, fleet: fleet, apiURL: apiURL}
}

func (h *agentHarness) enrollAgentNode(name string) *baremetal.Node {
	h.t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware,
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name,
		InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func TestAgentLifecycle(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := h.enrollAgentNode("agent-1")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	if h.fleet.Boots(n.UUID) != 1 {
		t.Fatalf("ramdisk boots during cleaning = %d, want 1", h.fleet.Boots(n.UUID))
	}
	must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{ConfigDrive: []byte(`{"meta_data":{"hostname":"agent-1"},"user_data":"#cloud-config\n"}`)}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.PowerState != "power on" {
		t.Errorf("active node power = %q, want power on", a.PowerState)
	}
	if h.fleet.Boots(n.UUID) != 2 {
		t.Errorf("ramdisk boots after deploy = %d, want 2", h.fleet.Boots(n.UUID))
	}
	must(h.c.Undeploy(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	hist, _ := h.store.ListHistory(h.ctx, n.UUID, 0)
	seen := map[string]bool{}
	for _, e := range hist {
		seen[e.Event] = true
	}
	for _, want := range []string{"step_end deploy.erase_devices_metadata", "step_end deploy.erase_devices", "step_end deploy.write_image", "step_end deploy.boot_instance"} {
		if !seen[want] {
			t.Errorf("history lacks %q", want)
		}
	}
	// The heartbeats the node waited for are in its history, in wait
	// states only, each after the boot's first (a boot stage).
	beats := 0
	for i, e := range hist {
		if e.EventType != conductor.EventTypeAgent {
			continue
		}
		beats++
		if e.Event != "agent heartbeat" || (e.State != statemachine.DeployWait && e.State != statemachine.CleanWait) {
			t.Errorf("heartbeat entry %+v; want one of a node in a wait state", e)
		}
		if !slices.ContainsFunc(hist[:i], func(p *baremetal.HistoryEntry) bool { return p.Event == "agent heartbeat" && p.EventType == "boot" }) {
			t.Errorf("heartbeat entry %d before the boot's first heartbeat", i)
		}
	}
	if beats == 0 {
		t.Error("no heartbeat in the history")
	}
	_ = steps.Clean
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// serveAgentAPI serves c's agent endpoints on api (an unstarted
// httptest.Server whose URL the conductor already knows), launches c, and
// stops it when the test ends.
func serveAgentAPI(t *testing.T, api *httptest.Server, c *conductor.Conductor) context.Context {
	t.Helper()
	h, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	api.Config.Handler = h
	api.Start()
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(sctx)
	})
	return ctx
}
