package traceflow_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/internal/otlptest"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"
)

var fakePlugin = &plugintest.Plugin{Package: "github.com/anvilmetal/anvil/plugins/fake", Name: "fake"}

func TestMain(m *testing.M) { plugintest.Main(m, fakePlugin) }

// TestDeployTraceAcrossPlugin deploys a simulated network-booted machine
// whose management and boot-device calls go to the fake driver plugin's
// process. The conductor and the plugin export to the test's collector;
// the deploy must be one trace: the verb's root span, its job, steps,
// agent commands, the boot with its stages as events, and the driver
// calls, each host span continued by the plugin process's span, every
// span's parent in the trace.
func TestDeployTraceAcrossPlugin(t *testing.T) {
	col := otlptest.Start(t)
	ctx := context.Background()
	tp := col.Provider(t, "anvil-conductor")

	store := sqlstoretest.OpenSQLite(t, clock.System())
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second, TracerProvider: tp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	apiURL := "http://" + api.Listener.Addr().String()
	fleet, err := simfleet.New(simfleet.Config{APIURL: apiURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })

	configs := netboottest.NewStore()
	power := &stagedPower{Power: fake.NewPower(fake.Config{}), fleet: fleet, configs: configs}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindPower:  {"staged", fake.Name},
			driver.KindDeploy: {agentdeploy.Name, fake.Name},
			driver.KindBoot:   {pxe.NameIPXE, fake.Name},
		}})
	for _, impl := range []driver.Implementation{
		{Kind: driver.KindPower, Name: "staged", Impl: power},
		{Kind: driver.KindDeploy, Name: agentdeploy.Name, Impl: agentdeploy.New(client)},
	} {
		if err := reg.RegisterInterface(impl.Kind, impl.Name, impl.Impl); err != nil {
			t.Fatal(err)
		}
	}
	reg.MustRegister(pxe.New(configs, pxe.Options{DeployKernel: "http://192.0.2.1:8080/ipa.kernel", DeployRamdisk: "http://192.0.2.1:8080/ipa.initramfs"}).Bundle())
	// The fake plugin serves fake-hardware and its management, which the
	// boot interface calls to set the boot device.
	plugintest.Load(t, fakePlugin.Path(t), plugintest.Options{Registry: reg, TracerProvider: tp,
		PluginEnv: col.PluginEnv()})

	c, err := conductor.New(store, reg, conductor.Options{Hostname: "trace-test", TracerProvider: tp, Logger: slog.New(slog.DiscardHandler),
		Agent: conductor.AgentSettings{Client: client, APIURL: apiURL, PollCommands: true}})
	if err != nil {
		t.Fatal(err)
	}
	power.observe = c.ObserveBootStage
	agent, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{UnrestrictedLookup: true, AllowInsecureCallback: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	api.Config.Handler = agent
	api.Start()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	n, err := c.Enroll(ctx, &baremetal.Node{Name: "traced", Driver: builtin.FakeHardware, BootInterface: pxe.NameIPXE, PowerInterface: "staged",
		DeployInterface: agentdeploy.Name,
		InstanceInfo:    map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	if n.ManagementInterface != fake.Name {
		t.Fatalf("management interface %q, want the plugin's fake", n.ManagementInterface)
	}
	if err := store.CreatePort(ctx, &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:cc:00:01", PXEEnabled: true}); err != nil {
		t.Fatal(err)
	}
	wait := func(s statemachine.State) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := c.WaitFor(wctx, n.UUID, s); err != nil {
			got, _ := store.GetNode(ctx, n.UUID)
			t.Fatalf("waiting for %s: %v (node %s, %q)", s, err, got.ProvisionState, got.LastError)
		}
	}
	if err := c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	wait(statemachine.Manageable)
	if err := c.Provide(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	wait(statemachine.Available)
	if err := c.Deploy(ctx, n.UUID, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(statemachine.Active)
	got, _ := store.GetNode(ctx, n.UUID)
	if _, ok := got.DriverInternalInfo["anvil_trace_context"]; ok {
		t.Fatal("the active node keeps the finished operation's trace context")
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	// The deploy's root, and its trace once the plugin's spans are in.
	var root otlptest.Span
	var tree []otlptest.Span
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		root, tree, ok = col.Tree("deploy", n.UUID)
		if ok && otlptest.Connected(tree) && otlptest.PluginAnswered(tree, "anvil-driver-fake") {
			break
		}
		if time.Now().After(deadline) {
			for _, s := range tree {
				t.Logf("%s %s %s parent %s", s.Service, s.Name, s.ID, s.Parent)
			}
			t.Fatalf("no complete deploy trace within 30 s (root %+v, %d spans)", root, len(tree))
		}
		time.Sleep(100 * time.Millisecond)
	}
	byID := otlptest.ByID(tree)
	names := map[string]int{}
	for _, s := range tree {
		names[s.Name]++
	}
	for _, want := range []string{"job deploy", "step deploy.deploy.deploy", "step deploy.deploy.write_image",
		"agent deploy.execute_deploy_step", "agent command status", "agent wait deploy.write_image", "heartbeat", "boot",
		"driver management.set_boot_device", "plugin management.set_boot_device"} {
		if names[want] == 0 {
			t.Errorf("the deploy's trace has no %q span; it has %v", want, names)
		}
	}
	// The trace holds this deploy only: no span of the cleaning before it.
	if names["job clean"] != 0 || names["provide"] != 0 {
		t.Errorf("the deploy's trace holds spans of the cleaning: %v", names)
	}
	for _, s := range tree {
		if s.Name == "job deploy" && s.Parent != root.ID {
			t.Errorf("job deploy's parent is %s, want the root %s", s.Parent, root.ID)
		}
		if s.Service == "anvil-driver-fake" {
			host, ok := byID[s.Parent]
			if !ok || host.Service != "anvil-conductor" || host.Kind != tracepb.Span_SPAN_KIND_CLIENT || host.Name != "driver"+s.Name[len("plugin"):] {
				t.Errorf("plugin span %s (%s) is not the child of the host's span of its call: parent %+v", s.Name, s.ID, host)
			}
			if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("plugin span %s has kind %v, want server", s.Name, s.Kind)
			}
		}
		if s.Name == "agent deploy.execute_deploy_step" && !otlptest.Descends(byID, s, "step deploy.deploy.write_image") && !otlptest.Descends(byID, s, "step deploy.deploy.deploy") {
			t.Errorf("the agent command span %s is under no step", s.ID)
		}
		if s.Name == "boot" {
			want := []string{"boot prepared", "dhcp discover", "dhcp offer", "dhcp ack", "tftp sent", "boot script", "kernel", "ramdisk", "agent lookup", "agent heartbeat"}
			if got := slices.Compact(slices.Clone(s.Events)); !slices.Equal(got, want) {
				t.Errorf("boot span events %v, want %v", s.Events, want)
			}
		}
	}
}

// stagedPower is fake power for a machine that boots from the network:
// powered on with a ramdisk boot configuration written for its MAC, it
// reports the boot server's stages of a network boot to the conductor, as
// the boot server would, and boots the simulated agent.
type stagedPower struct {
	*fake.Power
	fleet   *simfleet.Fleet
	configs *netboottest.Store
	observe func(stage.Record)
}

func (p *stagedPower) follow(t *driver.Task) error {
	state, _ := t.InternalString(fake.PowerStateKey)
	device, ok := t.InternalString(fake.BootDeviceKey)
	if !ok {
		device = string(driver.BootPXE)
	}
	var macs []string
	var cfg netboot.Config
	found := false
	for _, port := range t.Ports {
		if port.PXEEnabled {
			macs = append(macs, port.Address)
			if c, ok := p.configs.ForMAC(port.Address); ok && !found {
				cfg, found = c, true
			}
		}
	}
	if state != string(driver.PowerOn) || device != string(driver.BootPXE) || !found || cfg.Action != netboot.Ramdisk || cfg.Node != t.NodeUUID {
		p.fleet.Halt(t.NodeUUID)
		return nil
	}
	for _, st := range []stage.Stage{stage.DHCPDiscover, stage.DHCPOffer, stage.DHCPAck, stage.TFTPSent, stage.Script, stage.Kernel, stage.Ramdisk} {
		time.Sleep(time.Millisecond)
		p.observe(stage.Record{Node: t.NodeUUID, Stage: st, MAC: macs[0], At: time.Now()})
	}
	time.Sleep(time.Millisecond)
	return p.fleet.Boot(t.NodeUUID, macs)
}

func (p *stagedPower) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	if err := p.Power.SetPowerState(ctx, t, target, timeout); err != nil {
		return err
	}
	return p.follow(t)
}

func (p *stagedPower) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	if err := p.Power.Reboot(ctx, t, timeout); err != nil {
		return err
	}
	return p.follow(t)
}

func (p *stagedPower) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	if a := p.fleet.Agent(t.NodeUUID); a != nil && a.IsGone() && a.CommandRuns(agentclient.CmdPowerOff) > 0 {
		t.SetDriverInternalInfo(fake.PowerStateKey, string(driver.PowerOff))
		p.fleet.Halt(t.NodeUUID)
		return driver.PowerOff, nil
	}
	return p.Power.GetPowerState(ctx, t)
}

var _ driver.PowerInterface = (*stagedPower)(nil)
