package webui_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/webui"
)

// stack is anvild's web surface in a test: a conductor on SQLite, the
// REST API with the agent endpoints, the web UI at /ui/ and the consoles
// at /console/ on one server; simulated machines that boot from the
// network (their boot stages reach the conductor as the boot server's
// would) into simulated agents; and a console interface running a shell
// loop that answers each line it reads.
type stack struct {
	t        testing.TB
	ctx      context.Context
	c        *conductor.Conductor
	store    baremetal.Store
	srv      *httptest.Server
	fleet    *simfleet.Fleet
	consoles *console.Manager
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() && os.Getenv("WEBUI_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newStack(t *testing.T, copts conductor.Options) *stack { return newStackTB(t, copts) }

func newStackTB(t testing.TB, copts conductor.Options) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := sqlstoretest.OpenSQLite(t, clock.System())
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	apiURL := "http://" + srv.Listener.Addr().String()
	fleet, err := simfleet.New(simfleet.Config{APIURL: apiURL, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	consoles := console.NewManager(console.Options{Logger: testLogger(t), KillTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = consoles.Close() })

	configs := netboottest.NewStore()
	power := &stagedPower{Power: fake.NewPower(fake.Config{}), fleet: fleet, configs: configs}
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy:  {agentdeploy.Name, fake.Name},
			driver.KindPower:   {stagedPowerName, fake.Name},
			driver.KindBoot:    {pxe.NameIPXE, fake.Name},
			driver.KindConsole: {shellConsoleName, fake.Name, driver.NoConsole},
		},
	})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	reg.MustRegister(pxe.New(configs, pxe.Options{DeployKernel: "http://192.0.2.1:8080/ipa.kernel", DeployRamdisk: "http://192.0.2.1:8080/ipa.initramfs"}).Bundle())
	for _, impl := range []driver.Implementation{
		{Kind: driver.KindDeploy, Name: agentdeploy.Name, Impl: agentdeploy.New(client)},
		{Kind: driver.KindPower, Name: stagedPowerName, Impl: power},
		{Kind: driver.KindConsole, Name: shellConsoleName, Impl: shellConsole{m: consoles}},
	} {
		if err := reg.RegisterInterface(impl.Kind, impl.Name, impl.Impl); err != nil {
			t.Fatal(err)
		}
	}
	if copts.Hostname == "" {
		copts.Hostname = "webui-test"
	}
	copts.Logger = testLogger(t)
	copts.Agent.Client, copts.Agent.APIURL = client, apiURL
	c, err := conductor.New(store, reg, copts)
	if err != nil {
		t.Fatal(err)
	}
	power.observe = c.ObserveBootStage

	agent, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{Logger: testLogger(t), UnrestrictedLookup: true, AllowInsecureCallback: true})
	if err != nil {
		t.Fatal(err)
	}
	api, err := ironicapi.New(ironicapi.Options{Conductor: c, Drivers: reg, Agent: agent, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := webui.New(webui.Options{Conductor: c, Consoles: consoles, ConsolePath: "/console", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", api.Protect(ui))
	mux.Handle("/console/", api.Protect(http.StripPrefix("/console/", consoles.Handler())))
	mux.Handle("/", api)
	srv.Config.Handler = mux
	srv.Start()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return &stack{t: t, ctx: ctx, c: c, store: store, srv: srv, fleet: fleet, consoles: consoles}
}

// enrollMachine enrolls a node that boots from the network, deploys with
// the agent and has a shell console.
func (s *stack) enrollMachine(name, mac string) *baremetal.Node {
	s.t.Helper()
	n, err := s.c.Enroll(s.ctx, &baremetal.Node{Name: name, Driver: builtin.FakeHardware, BootInterface: pxe.NameIPXE,
		PowerInterface: stagedPowerName, DeployInterface: agentdeploy.Name, ConsoleInterface: shellConsoleName,
		InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.store.CreatePort(s.ctx, &baremetal.Port{NodeUUID: n.UUID, Address: mac, PXEEnabled: true}); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// waitFor waits until the node is in state, failing on a failure state.
func (s *stack) waitFor(uuid string, state statemachine.State) *baremetal.Node {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	n, err := s.c.WaitFor(ctx, uuid, state)
	if err != nil {
		got, _ := s.store.GetNode(context.Background(), uuid)
		if got != nil {
			s.t.Fatalf("waiting for %s: %v (node in %s, last error %q)", state, err, got.ProvisionState, got.LastError)
		}
		s.t.Fatalf("waiting for %s: %v", state, err)
	}
	return n
}

const stagedPowerName = "staged"

// stagedPower is fake power for a machine that boots from the network:
// powered on (or rebooted) with a ramdisk boot configuration written for
// its MAC, it reports the boot server's stages of a network boot (DHCP,
// TFTP, the iPXE script, kernel and ramdisk) to the conductor, as the
// boot server would while serving it, and then boots the simulated
// agent; otherwise it boots its disk.
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
	if state != string(driver.PowerOn) || device != string(driver.BootPXE) {
		p.fleet.Halt(t.NodeUUID)
		return nil
	}
	var macs []string
	var cfg netboot.Config
	found := false
	for _, port := range t.Ports {
		if !port.PXEEnabled {
			continue
		}
		macs = append(macs, port.Address)
		if c, ok := p.configs.ForMAC(port.Address); ok && !found {
			cfg, found = c, true
		}
	}
	if !found || cfg.Action != netboot.Ramdisk || cfg.Node != t.NodeUUID {
		p.fleet.Halt(t.NodeUUID)
		return nil
	}
	// The stages follow one another, as a machine's requests do.
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

// GetPowerState reads power off once the agent powered the machine off.
func (p *stagedPower) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	if a := p.fleet.Agent(t.NodeUUID); a != nil && a.IsGone() && a.CommandRuns(agentclient.CmdPowerOff) > 0 {
		t.SetDriverInternalInfo(fake.PowerStateKey, string(driver.PowerOff))
		p.fleet.Halt(t.NodeUUID)
		return driver.PowerOff, nil
	}
	return p.Power.GetPowerState(ctx, t)
}

var _ driver.PowerInterface = (*stagedPower)(nil)

const shellConsoleName = "shell"

// shellConsole is a console interface whose "machine" is a shell loop
// under the console manager's pseudo-terminal: it prints a banner and
// answers every line it reads with "machine got: <line>".
type shellConsole struct{ m *console.Manager }

// shellBanner is what the shell machine prints when it starts.
const shellBanner = "ANVIL TEST MACHINE READY"

func (shellConsole) Properties() []driver.Property                { return nil }
func (shellConsole) Validate(context.Context, *driver.Task) error { return nil }

func (c shellConsole) StartConsole(ctx context.Context, t *driver.Task) error {
	_, err := c.m.Start(ctx, console.Spec{NodeUUID: t.NodeUUID, Ready: shellBanner, Command: console.Command{Path: "/bin/sh",
		Args: []string{"-c", `echo "` + shellBanner + `"; while read -r l; do echo "machine got: $l"; done`}}})
	return err
}

func (c shellConsole) StopConsole(ctx context.Context, t *driver.Task) error {
	if err := c.m.Stop(ctx, t.NodeUUID); err != nil && !errors.Is(err, console.ErrNoSession) {
		return err
	}
	return nil
}

func (c shellConsole) GetConsole(_ context.Context, t *driver.Task) (driver.ConsoleInfo, error) {
	info, ok := c.m.Info(t.NodeUUID)
	if !ok {
		return driver.ConsoleInfo{}, fmt.Errorf("console/%s: node %s: %w", shellConsoleName, t.NodeUUID, console.ErrNoSession)
	}
	return driver.ConsoleInfo{Type: "socat", URL: info.URL()}, nil
}

var _ driver.ConsoleInterface = shellConsole{}

// newServer serves h on a loopback port for the test and returns its URL.
func newServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
