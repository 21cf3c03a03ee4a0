package clusterlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/hashring"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// LabHardwareType is the hardware type of the lab's machines.
const LabHardwareType = builtin.FakeHardware

// LabPowerName is the name of the lab's power interface.
const LabPowerName = "lab"

// Power is fake power wired to the lab's BMC endpoint: setting the power
// boots the node's simulated ramdisk (when its boot is prepared for the
// ramdisk) or halts it, in the lab's process. The fake power state itself
// is kept by an inner fake power interface: the in-process one, or the
// fake plugin's served out of process (PluginDir).
type Power struct {
	driver.PowerInterface
	lab       string
	conductor string
	hc        *http.Client
}

// NewPower returns the lab power interface calling the lab at labURL on
// behalf of conductor, keeping the power state with the in-process fake
// power.
func NewPower(labURL, conductor string) *Power {
	return NewPowerWith(fake.NewPower(fake.Config{}), labURL, conductor)
}

// NewPowerWith is NewPower keeping the power state with inner, a fake
// power interface (such as the fake plugin's proxy): inner must record the
// state under fake.PowerStateKey.
func NewPowerWith(inner driver.PowerInterface, labURL, conductor string) *Power {
	return &Power{PowerInterface: inner, lab: labURL, conductor: conductor,
		hc: &http.Client{Timeout: 10 * time.Second, Transport: fleetTransport()}}
}

func (p *Power) follow(ctx context.Context, t *driver.Task) error {
	state, _ := t.InternalString(fake.PowerStateKey)
	prepared, _ := t.InternalString(fake.BootPreparedKey)
	req := bmcRequest{On: state == string(driver.PowerOn), Ramdisk: prepared == "ramdisk", Conductor: p.conductor}
	for _, port := range t.Ports {
		req.MACs = append(req.MACs, port.Address)
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.lab+"/bmc/"+t.NodeUUID, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := p.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("power/lab: BMC of node %s: %w", t.NodeUUID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("power/lab: BMC of node %s answered %s", t.NodeUUID, resp.Status)
	}
	return nil
}

// GetPowerState reads the power state kept by the inner interface, except
// that a machine the lab's BMC reads as off (its agent powered it off
// with standby.power_off, as IPA does) reads power off, and the inner
// state follows.
func (p *Power) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	got, err := p.PowerInterface.GetPowerState(ctx, t)
	if err != nil || got != driver.PowerOn {
		return got, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, p.lab+"/bmc/"+t.NodeUUID, nil)
	if err != nil {
		return driver.PowerUnknown, err
	}
	resp, err := p.hc.Do(hr)
	if err != nil {
		return driver.PowerUnknown, fmt.Errorf("power/lab: BMC of node %s: %w", t.NodeUUID, err)
	}
	defer resp.Body.Close()
	var st bmcState
	if resp.StatusCode != http.StatusOK {
		return driver.PowerUnknown, fmt.Errorf("power/lab: BMC of node %s answered %s", t.NodeUUID, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return driver.PowerUnknown, fmt.Errorf("power/lab: BMC of node %s: %w", t.NodeUUID, err)
	}
	if st.Known && !st.On {
		t.SetDriverInternalInfo(fake.PowerStateKey, string(driver.PowerOff))
		return driver.PowerOff, nil
	}
	return got, nil
}

// SetPowerState sets the power and boots or halts the ramdisk.
func (p *Power) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	if err := p.PowerInterface.SetPowerState(ctx, t, target, timeout); err != nil {
		return err
	}
	return p.follow(ctx, t)
}

// Reboot power-cycles the node.
func (p *Power) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	if err := p.PowerInterface.Reboot(ctx, t, timeout); err != nil {
		return err
	}
	return p.follow(ctx, t)
}

var _ driver.PowerInterface = (*Power)(nil)

// ConductorConfig configures one lab conductor process.
type ConductorConfig struct {
	// DSN is the PostgreSQL database shared by the fleet.
	DSN string
	// Hostname is the conductor's name.
	Hostname string
	// AgentListen is where the agent API is served ("127.0.0.1:0" picks a
	// port; Ready reports it).
	AgentListen string
	// LabURL is the lab's base URL (BMCs).
	LabURL string
	// Algorithm is the ring algorithm ("balanced" or "ironic").
	Algorithm string
	// HeartbeatTimeout, KeepaliveInterval, OrphanCheckInterval,
	// RingReset, IntentPoll and SyncPower are the scaled-down timers.
	HeartbeatTimeout    time.Duration
	KeepaliveInterval   time.Duration
	OrphanCheckInterval time.Duration
	RingReset           time.Duration
	IntentPoll          time.Duration
	SyncPower           time.Duration
	// PowerOffPoll is how often the power state is read while a node
	// whose agent was asked to power it off (standby.power_off) goes off;
	// 0 means the conductor's default (Ironic's 5 s).
	PowerOffPoll time.Duration
	// CallbackTimeout bounds every wait for an agent (deploy, clean,
	// rescue, service, inspect); 0 means Ironic's 1800 s.
	CallbackTimeout time.Duration
	// RerunSafeSteps lists out-of-band steps ("interface.step") safe to
	// re-run after a takeover, beyond those their implementation declares
	// (the direct deploy interface declares its own).
	RerunSafeSteps []string
	// PluginDir, when set, is a driver plugin directory holding the fake
	// plugin (anvil-driver-fake, built from plugins/fake): the lab power
	// keeps its state through the plugin's fake power, out of process,
	// under the host's supervision (GET /lab/plugin reports its status).
	PluginDir string
	// IPMIConsole also enables the ipmi hardware type (in process, as
	// ipmitool.NewDrivers declares it: ipmitool power, management and
	// vendor) with the ipmitool-socat console interface, whose consoles
	// run in a console.Manager of this process, closed when it stops (a
	// SIGKILL never gets there: the consoles' ipmitool processes then die
	// with it). Nodes of the lab fleet are not affected.
	IPMIConsole bool
	// Workers bounds the worker pool; 0 means the default.
	Workers int
	// Ready is called with the agent API URL once the conductor runs.
	Ready func(agentAPI string)
	// Logger receives the conductor's logs.
	Logger *slog.Logger
}

// NewRegistry returns the lab's driver registry: fake-hardware with the
// lab power and the direct (agent) deploy interfaces enabled first.
func NewRegistry(labURL, conductor string, client *agentclient.Client) (*driver.Registry, error) {
	return NewRegistryWithPower(labURL, conductor, client, nil)
}

// NewRegistryWithPower is NewRegistry with the lab power keeping its state
// through inner (nil: the in-process fake power).
func NewRegistryWithPower(labURL, conductor string, client *agentclient.Client, inner driver.PowerInterface) (*driver.Registry, error) {
	return newRegistry(labURL, conductor, client, inner, nil)
}

// NewIPMIRegistry is NewRegistry with the ipmi hardware type and the
// ipmitool-socat console interface running consoles in consoles
// (ConductorConfig.IPMIConsole).
func NewIPMIRegistry(labURL, conductor string, client *agentclient.Client, consoles *console.Manager, log *slog.Logger) (*driver.Registry, error) {
	if consoles == nil {
		return nil, errors.New("clusterlab: NewIPMIRegistry: nil console manager")
	}
	return newRegistry(labURL, conductor, client, nil, &ipmiConsoles{m: consoles, log: log})
}

// ipmiConsoles is what the ipmi part of a lab registry needs.
type ipmiConsoles struct {
	m   *console.Manager
	log *slog.Logger
}

func newRegistry(labURL, conductor string, client *agentclient.Client, inner driver.PowerInterface, ipmi *ipmiConsoles) (*driver.Registry, error) {
	cfg := driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {agentdeploy.Name, fake.Name},
			driver.KindPower:  {LabPowerName, fake.Name},
		},
	}
	if ipmi != nil {
		cfg.EnabledHardwareTypes = append(cfg.EnabledHardwareTypes, ipmitool.HardwareType)
		cfg.EnabledInterfaces[driver.KindPower] = append(cfg.EnabledInterfaces[driver.KindPower], ipmitool.ImplIPMITool)
		// Consoles are enabled by name (Ironic's
		// enabled_console_interfaces); fake-hardware nodes keep
		// no-console.
		cfg.EnabledInterfaces[driver.KindConsole] = []string{ipmisol.Name, driver.NoConsole}
	}
	reg := driver.NewRegistry(cfg)
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		return nil, err
	}
	if ipmi != nil {
		if err := reg.Register(ipmitool.NewDrivers(ipmitool.Options{}).Bundle()); err != nil {
			return nil, err
		}
		// The ipmi hardware type's boot interfaces (its default, ipxe,
		// among them) must resolve; the lab never network-boots its ipmi
		// nodes, so their boot configurations go to an in-memory store.
		if err := reg.Register(pxe.New(netboottest.NewStore(), pxe.Options{}).Bundle()); err != nil {
			return nil, err
		}
		if err := reg.Register(ipmisol.New(ipmi.m, ipmisol.Options{Logger: ipmi.log}).Bundle()); err != nil {
			return nil, err
		}
	}
	if client != nil {
		if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
			return nil, err
		}
	}
	power := NewPower(labURL, conductor)
	if inner != nil {
		power = NewPowerWith(inner, labURL, conductor)
	}
	if err := reg.RegisterInterface(driver.KindPower, LabPowerName, power); err != nil {
		return nil, err
	}
	return reg, nil
}

// RingConfig maps the algorithm flag to the ring configuration.
func RingConfig(algorithm string) (hashring.Config, error) {
	switch algorithm {
	case "", "balanced":
		return hashring.Config{Algorithm: hashring.Balanced}, nil
	case "ironic", "ironic-compatible":
		return hashring.Config{Algorithm: hashring.IronicCompatible}, nil
	}
	return hashring.Config{}, fmt.Errorf("clusterlab: unknown ring algorithm %q (want balanced or ironic)", algorithm)
}

// RunConductor runs one conductor of the lab fleet until ctx ends, then
// stops it (a SIGKILL never gets there, which is the point of the lab).
func RunConductor(ctx context.Context, cfg ConductorConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ringCfg, err := RingConfig(cfg.Algorithm)
	if err != nil {
		return err
	}
	store, err := sqlstore.OpenPostgres(ctx, cfg.DSN, sqlstore.Options{MaxOpenConns: 24})
	if err != nil {
		return err
	}
	defer store.Close()
	notifier, err := sqlstore.NewNotifier(ctx, cfg.DSN, log)
	if err != nil {
		return err
	}
	defer notifier.Close()
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer client.Close()
	var (
		inner driver.PowerInterface
		fake  *plugin.Plugin
	)
	if cfg.PluginDir != "" {
		host := plugin.NewHost(plugin.HostConfig{Dirs: []string{cfg.PluginDir}, Logger: log})
		defer host.Close()
		if inner, fake, err = fakePluginPower(ctx, host); err != nil {
			return err
		}
	}
	var consoles *ipmiConsoles
	if cfg.IPMIConsole {
		m := console.NewManager(console.Options{Logger: log})
		defer func() {
			if err := m.Close(); err != nil {
				log.Warn("console manager close failed", "error", err)
			}
		}()
		consoles = &ipmiConsoles{m: m, log: log}
	}
	reg, err := newRegistry(cfg.LabURL, cfg.Hostname, client, inner, consoles)
	if err != nil {
		return err
	}
	c, err := conductor.New(store, reg, conductor.Options{
		Agent:                  conductor.AgentSettings{Client: client, PowerOffPollInterval: cfg.PowerOffPoll},
		Hostname:               cfg.Hostname,
		Workers:                cfg.Workers,
		Logger:                 log,
		KeepaliveInterval:      cfg.KeepaliveInterval,
		IntentPollInterval:     cfg.IntentPoll,
		SyncPowerStateInterval: cfg.SyncPower,
		DeployCallbackTimeout:  cfg.CallbackTimeout,
		CleanCallbackTimeout:   cfg.CallbackTimeout,
		RescueCallbackTimeout:  cfg.CallbackTimeout,
		ServiceCallbackTimeout: cfg.CallbackTimeout,
		InspectWaitTimeout:     cfg.CallbackTimeout,
		// The lab drives its whole fleet at once (300 nodes in the chaos
		// test): Ironic's max_concurrent_clean of 50 would refuse most
		// of each wave, which is not what the lab measures.
		MaxConcurrentDeploy: -1,
		MaxConcurrentClean:  -1,
		// The timeout checks run at the orphan check's pace.
		CheckProvisionStateInterval: cfg.OrphanCheckInterval,
		LockPolicy:                  &baremetal.LockPolicy{Attempts: 20, Interval: 50 * time.Millisecond},
		Cluster: &conductor.ClusterOptions{
			Ring:                conductor.RingOptions{Ring: ringCfg, ResetInterval: cfg.RingReset, HeartbeatTimeout: cfg.HeartbeatTimeout},
			Notifier:            notifier,
			OrphanCheckInterval: cfg.OrphanCheckInterval,
			RerunSafeSteps:      cfg.RerunSafeSteps,
		},
	})
	if err != nil {
		return err
	}
	h, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.AgentListen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /lab/verb/{node}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		serveVerb(w, r, c)
	})
	mux.HandleFunc("GET /lab/plugin", func(w http.ResponseWriter, _ *http.Request) {
		if fake == nil {
			http.Error(w, "no plugin loaded", http.StatusNotFound)
			return
		}
		st := fake.Status()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(PluginStatus{PID: st.PID, Running: st.Running, Restarts: st.Restarts})
	})
	mux.HandleFunc("GET /lab/console/{node}", func(w http.ResponseWriter, r *http.Request) {
		serveConsole(w, r, c, consoles)
	})
	// The agent endpoints get their requests without a ServeMux in
	// front: one would redirect paths such as /v1/heartbeat/. before the
	// handler could refuse them.
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/lab/") {
			mux.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := agentclient.NewServer(root, agentclient.ServerConfig{ReadHeaderTimeout: 5 * time.Second})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := c.Launch(ctx); err != nil {
		_ = srv.Close()
		return err
	}
	if cfg.Ready != nil {
		cfg.Ready("http://" + ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("agent API stopped", "error", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := c.Stop(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// PluginStatus is what GET /lab/plugin reports of a conductor's fake
// plugin: its process id (0 when not running), whether a process runs, and
// how many processes the host started after the first.
type PluginStatus struct {
	PID      int  `json:"pid"`
	Running  bool `json:"running"`
	Restarts int  `json:"restarts"`
}

// fakePluginPower discovers the plugins of host and returns the fake
// plugin's fake power implementation and the plugin.
func fakePluginPower(ctx context.Context, host *plugin.Host) (driver.PowerInterface, *plugin.Plugin, error) {
	report, err := host.Discover(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("clusterlab: plugin discovery: %w", err)
	}
	if err := report.Err(); err != nil {
		return nil, nil, fmt.Errorf("clusterlab: plugin discovery: %w", err)
	}
	for _, p := range report.Plugins {
		b, err := p.Bundle()
		if err != nil {
			return nil, nil, fmt.Errorf("clusterlab: plugin %s: %w", p.Name(), err)
		}
		for _, impl := range b.Implementations {
			if impl.Kind != driver.KindPower || impl.Name != fake.Name {
				continue
			}
			if pw, ok := impl.Impl.(driver.PowerInterface); ok {
				return pw, p, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("clusterlab: no plugin in the plugin directory serves the %s power interface", fake.Name)
}

// serveVerb is the lab's control API: POST /lab/verb/<node>/<verb> calls
// the verb on this conductor, which accepts it whoever owns the node.
// Answers: 202 accepted, 409 locked or refused by the state machine, 503
// not served or over a concurrent action limit (with Retry-After, as
// Ironic's ConcurrentActionLimit), 500 otherwise; the body is the error
// text and the refusalHeader names the sentinel the error matched, so
// that the client (VerbClient) gives its caller an error that matches it
// too.
func serveVerb(w http.ResponseWriter, r *http.Request, c *conductor.Conductor) {
	node, verb := r.PathValue("node"), r.PathValue("verb")
	var err error
	switch verb {
	case "manage":
		err = c.Manage(r.Context(), node)
	case "provide":
		err = c.Provide(r.Context(), node)
	case "deploy":
		// Tear-down clears instance_info, so every deploy names its
		// image again, as a user of Ironic's API does.
		_, err = c.Update(r.Context(), node, func(n *baremetal.Node) error {
			if n.InstanceInfo == nil {
				n.InstanceInfo = map[string]any{}
			}
			n.InstanceInfo["image_source"] = "http://images.example/ubuntu.qcow2"
			n.InstanceInfo["image_checksum"] = "0123456789abcdef0123456789abcdef"
			return nil
		})
		if err == nil {
			err = c.Deploy(r.Context(), node, conductor.DeployOptions{})
		}
	case "undeploy":
		err = c.Undeploy(r.Context(), node)
	case "console-on", "console-off":
		err = c.SetConsoleMode(r.Context(), node, verb == "console-on")
	default:
		http.Error(w, "unknown verb "+verb, http.StatusNotFound)
		return
	}
	answerVerb(w, err)
}

// ConsoleStatus is what GET /lab/console/<node> reports: the conductor's
// ConsoleInfo (Enabled, Type, URL) and, when this conductor's process
// runs the node's console, the console program's PID (0 otherwise; the
// node must be named by its UUID for the PID).
type ConsoleStatus struct {
	Enabled bool   `json:"enabled"`
	Type    string `json:"type,omitempty"`
	URL     string `json:"url,omitempty"`
	PID     int    `json:"pid,omitempty"`
}

// serveConsole answers GET /lab/console/<node> with a ConsoleStatus; a
// disabled console is a ConsoleStatus with Enabled false, other errors
// are answered as refused verbs are.
func serveConsole(w http.ResponseWriter, r *http.Request, c *conductor.Conductor, consoles *ipmiConsoles) {
	node := r.PathValue("node")
	st, err := c.ConsoleInfo(r.Context(), node)
	if err != nil && !errors.Is(err, conductor.ErrConsoleNotEnabled) {
		answerVerb(w, err)
		return
	}
	out := ConsoleStatus{Enabled: st.Enabled}
	if st.Info != nil {
		out.Type, out.URL = st.Info.Type, st.Info.URL
	}
	if consoles != nil {
		if ci, ok := consoles.m.Info(node); ok {
			out.PID = ci.PID
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
