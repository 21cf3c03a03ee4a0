// Package simfleet wires fake-hardware nodes to simulated ramdisks: its
// power interface behaves like fake power and, whenever a node is powered
// on (or rebooted) with its boot interface prepared for the ramdisk, boots
// a simulated Ironic Python Agent for it (agentclient/agenttest) that looks
// the node up and heartbeats over real HTTP; powering the node off, or
// booting it into anything else, stops that agent. When the ramdisk boot
// was prepared for in-band inspection (the fake boot interface recorded an
// ipa-inspection-callback-url ramdisk parameter), the agent first posts
// its hardware inventory there. It is what the quickstart, the fleet
// benchmark's agent mode and the conductor's agent tests run on.
//
// # Usage
//
//	fleet, _ := simfleet.New(simfleet.Config{APIURL: apiURL})
//	defer fleet.Close()
//	reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{}))
//	// enroll nodes with power_interface "sim", boot_interface "fake",
//	// deploy_interface "direct" ...
package simfleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
)

// PowerName is the implementation name of the simulated power interface.
const PowerName = "sim"

// Config configures a simulated fleet.
type Config struct {
	// APIURL is where the agent lookup and heartbeat handler is mounted.
	APIURL string
	// Server hosts the agents; nil starts a shared TLS server on a free
	// loopback port, closed by Close.
	Server *agenttest.Server
	// HTTPClient is what the ramdisks call the API with (an HTTPS API
	// needs one trusting its certificate); nil means a plain client with
	// a 30 s timeout.
	HTTPClient *http.Client
	// IPAPace paces the agents as IPA does instead of fast: every timing
	// below left zero takes IPA's default (heartbeats every
	// heartbeat_timeout × random(0.3, 0.6), forced ones at most every
	// 5 s, lookups backing off from 1 s, retries after 5–10 s).
	IPAPace bool
	// HeartbeatInterval, LookupInterval and RetryInterval pace the agents;
	// zero means 200 ms, 20 ms and 50 ms (fast, for demos and tests)
	// unless IPAPace is set.
	HeartbeatInterval time.Duration
	LookupInterval    time.Duration
	RetryInterval     time.Duration
	// ForcedHeartbeatInterval is the least time between a heartbeat and
	// the next one forced by a finished command (IPA's 5 s); zero means
	// LookupInterval, or IPA's 5 s with IPAPace.
	ForcedHeartbeatInterval time.Duration
	// CommandDelay is how long agent commands run; zero means 5 ms.
	CommandDelay time.Duration
	// Agent, when set, builds the fake agent of a node at each boot
	// (tests script behaviours here); nil means a default agent.
	Agent func(nodeUUID string) *agenttest.Agent
	// Logger receives the ramdisks' progress; nil discards.
	Logger *slog.Logger
	// Inspection, when set, adjusts what a node's ramdisk booted for
	// inspection posts: it receives the default (agenttest.DefaultInventory
	// of the node's MACs, posted to the callback URL the boot was prepared
	// with) and returns what to post (tests inject errors here).
	Inspection func(nodeUUID string, def agenttest.InspectionConfig) agenttest.InspectionConfig
	// OwnAddresses gives each node an address of its own, as real
	// machines have, instead of one shared agent server: each boot's
	// agent is served by a TLS server of its own (a certificate of its
	// own, as IPA's auto-TLS makes one per boot) on the node's loopback
	// address (127.1.0.1, 127.1.0.2, ... in the order nodes first boot;
	// every 127/8 address is on lo on Linux) and one port the fleet
	// picks for all (as IPA listens on 9999 on every machine), so that
	// a node's agent URL is the same from boot to boot; the ramdisk
	// calls the API from that address. The conductor then holds connections and
	// TLS sessions per agent, as with a real fleet. Server must be nil
	// (Fleet.Server then returns nil), and HTTPClient's Transport an
	// *http.Transport or nil (each node's client is a clone dialing from
	// its address).
	OwnAddresses bool
}

// InspectionCallbackParam is the ramdisk parameter that makes a booted
// ramdisk post its inventory (Ironic's ipa-inspection-callback-url).
const InspectionCallbackParam = "ipa-inspection-callback-url"

// Fleet is a set of simulated machines' ramdisks. It is safe for
// concurrent use; Close stops every running ramdisk.
type Fleet struct {
	cfg    Config
	server *agenttest.Server
	own    bool
	hc     *http.Client

	mu          sync.Mutex
	running     map[string]*boot
	boots       map[string]int
	inspections map[string]int
	powerCalls  map[string][]PowerCall
	closed      bool
	wg          sync.WaitGroup
	// With OwnAddresses: each node's address and HTTP client.
	addrs   map[string]netip.Addr
	clients map[string]*http.Client
	port    uint16
}

type boot struct {
	rd     *agenttest.Ramdisk
	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a fleet (and its agent server when none is given).
func New(cfg Config) (*Fleet, error) {
	if cfg.APIURL == "" {
		return nil, fmt.Errorf("simfleet: APIURL is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if !cfg.IPAPace {
		def(&cfg.HeartbeatInterval, 200*time.Millisecond)
		def(&cfg.LookupInterval, 20*time.Millisecond)
		def(&cfg.RetryInterval, 50*time.Millisecond)
	}
	def(&cfg.CommandDelay, 5*time.Millisecond)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	}
	f := &Fleet{cfg: cfg, server: cfg.Server, running: map[string]*boot{}, boots: map[string]int{}, inspections: map[string]int{},
		powerCalls: map[string][]PowerCall{}, hc: hc, addrs: map[string]netip.Addr{}, clients: map[string]*http.Client{}}
	if cfg.OwnAddresses {
		if cfg.Server != nil {
			return nil, fmt.Errorf("simfleet: OwnAddresses serves each agent itself: Server must be nil")
		}
		if _, ok := hc.Transport.(*http.Transport); hc.Transport != nil && !ok {
			return nil, fmt.Errorf("simfleet: OwnAddresses needs HTTPClient.Transport to be an *http.Transport or nil, not %T", hc.Transport)
		}
		// The agents' port: one the system says is free on loopback.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("simfleet: picking the agents' port: %w", err)
		}
		f.port = uint16(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	} else if f.server == nil {
		srv, err := agenttest.NewServer(agenttest.ServerConfig{})
		if err != nil {
			return nil, fmt.Errorf("simfleet: agent server: %w", err)
		}
		f.server, f.own = srv, true
	}
	return f, nil
}

// Server returns the server hosting the agents; its certificate is what
// the agents send as agent_verify_ca.
func (f *Fleet) Server() *agenttest.Server { return f.server }

// Boot starts a simulated ramdisk for the node (replacing a running one),
// as powering it on into the ramdisk does.
func (f *Fleet) Boot(nodeUUID string, macs []string) error {
	return f.boot(nodeUUID, macs, nil)
}

// BootInspection starts a simulated ramdisk in inspection mode: it posts
// the inventory of macs (fake.MAC of the node when there are none)
// to callbackURL (empty: the API's /v1/continue_inspection) before its
// lookup, then looks up and heartbeats as usual.
func (f *Fleet) BootInspection(nodeUUID string, macs []string, callbackURL string) error {
	invMACs := macs
	if len(invMACs) == 0 {
		invMACs = []string{fake.MAC(nodeUUID)}
	}
	inv := agenttest.DefaultInventory(invMACs)
	ic := agenttest.InspectionConfig{CallbackURL: callbackURL, Inventory: &inv}
	if f.cfg.Inspection != nil {
		ic = f.cfg.Inspection(nodeUUID, ic)
	}
	return f.boot(nodeUUID, macs, &ic)
}

func (f *Fleet) boot(nodeUUID string, macs []string, inspection *agenttest.InspectionConfig) error {
	f.Halt(nodeUUID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("simfleet: closed")
	}
	var agent *agenttest.Agent
	if f.cfg.Agent != nil {
		agent = f.cfg.Agent(nodeUUID)
	} else {
		agent = agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: f.cfg.CommandDelay})
	}
	rc := agenttest.RamdiskConfig{
		APIURL: f.cfg.APIURL, HTTPClient: f.hc, MACs: macs, NodeUUID: nodeUUID, Agent: agent, Server: f.server,
		LookupInterval: f.cfg.LookupInterval, LookupMaxInterval: 4 * f.cfg.LookupInterval, LookupTimeout: 10 * time.Minute,
		HeartbeatInterval: f.cfg.HeartbeatInterval,
		HeartbeatRetryMin: f.cfg.RetryInterval, HeartbeatRetryMax: 2 * f.cfg.RetryInterval,
		MinForcedInterval: f.cfg.LookupInterval, Logger: f.cfg.Logger, Inspection: inspection,
	}
	if f.cfg.ForcedHeartbeatInterval > 0 {
		rc.MinForcedInterval = f.cfg.ForcedHeartbeatInterval
	}
	// With IPAPace the fields left zero take IPA's own defaults in the
	// ramdisk.
	if f.cfg.RetryInterval > 0 {
		rc.LookupConflictBackoff = []time.Duration{f.cfg.RetryInterval, f.cfg.RetryInterval, 2 * f.cfg.RetryInterval}
	}
	if f.cfg.OwnAddresses {
		addr, err := f.addrFor(nodeUUID)
		if err != nil {
			return err
		}
		rc.Server, rc.ServerAddr, rc.HTTPClient = nil, netip.AddrPortFrom(addr, f.port).String(), f.clients[nodeUUID]
	}
	rd, err := agenttest.NewRamdisk(rc)
	if err != nil {
		return fmt.Errorf("simfleet: boot %s: %w", nodeUUID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &boot{rd: rd, cancel: cancel, done: make(chan struct{})}
	f.running[nodeUUID] = b
	f.boots[nodeUUID]++
	if inspection != nil {
		f.inspections[nodeUUID]++
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(b.done)
		if err := rd.Run(ctx); err != nil && f.cfg.Logger != nil {
			f.cfg.Logger.Warn("simulated ramdisk stopped", "node", nodeUUID, "error", err)
		}
	}()
	return nil
}

// maxOwnAddresses is how many nodes get an address with OwnAddresses:
// 127.1.0.1 to 127.254.255.254.
const maxOwnAddresses = 254<<16 - 2

// addrFor returns the node's own address and makes its HTTP client on
// first use; f.mu is held.
func (f *Fleet) addrFor(nodeUUID string) (netip.Addr, error) {
	if a, ok := f.addrs[nodeUUID]; ok {
		return a, nil
	}
	k := len(f.addrs) + 1
	if k > maxOwnAddresses {
		return netip.Addr{}, fmt.Errorf("simfleet: boot %s: all %d loopback addresses are taken", nodeUUID, maxOwnAddresses)
	}
	a := netip.AddrFrom4([4]byte{127, byte(1 + k>>16), byte(k >> 8), byte(k)})
	var tr *http.Transport
	if base, ok := f.hc.Transport.(*http.Transport); ok {
		tr = base.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	d := &net.Dialer{Timeout: 30 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))}
	tr.DialContext = d.DialContext
	f.addrs[nodeUUID] = a
	f.clients[nodeUUID] = &http.Client{Transport: tr, Timeout: f.hc.Timeout}
	return a, nil
}

// Addr returns the node's own address (OwnAddresses), invalid before its
// first boot or without OwnAddresses.
func (f *Fleet) Addr(nodeUUID string) netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addrs[nodeUUID]
}

// Halt stops the node's ramdisk, as powering it off does.
func (f *Fleet) Halt(nodeUUID string) {
	f.mu.Lock()
	b := f.running[nodeUUID]
	delete(f.running, nodeUUID)
	f.mu.Unlock()
	if b == nil {
		return
	}
	b.cancel()
	<-b.done
	_ = b.rd.Close()
}

// Agent returns the fake agent currently running on the node, or nil.
func (f *Fleet) Agent(nodeUUID string) *agenttest.Agent {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.running[nodeUUID]; b != nil {
		return b.rd.Agent()
	}
	return nil
}

// Boots returns how many times the node was booted into the ramdisk.
func (f *Fleet) Boots(nodeUUID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boots[nodeUUID]
}

// Inspections returns how many of the node's ramdisk boots were in
// inspection mode.
func (f *Fleet) Inspections(nodeUUID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inspections[nodeUUID]
}

// Close stops every ramdisk and the fleet's own server.
func (f *Fleet) Close() error {
	f.mu.Lock()
	f.closed = true
	ids := make([]string, 0, len(f.running))
	for id := range f.running {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.Halt(id)
	}
	f.wg.Wait()
	f.mu.Lock()
	for _, c := range f.clients {
		c.CloseIdleConnections()
	}
	f.mu.Unlock()
	if f.own {
		return f.server.Close()
	}
	return nil
}

// Power returns the simulated power interface: fake power (configured by
// cfg) that boots and halts the fleet's ramdisks.
func (f *Fleet) Power(cfg fake.Config) *Power {
	return &Power{PowerInterface: fake.NewPower(cfg), fleet: f}
}

// PowerOver returns the simulated power interface over inner, a power
// interface that keeps the fake's state keys (fake power served by a
// plugin process, say): inner reads and sets the power state, and the
// fleet boots and halts the ramdisks as Power does.
func (f *Fleet) PowerOver(inner driver.PowerInterface) *Power {
	return &Power{PowerInterface: inner, fleet: f}
}

// Power is fake power wired to the fleet.
type Power struct {
	driver.PowerInterface
	fleet *Fleet
}

func (p *Power) follow(t *driver.Task) error {
	state, _ := t.InternalString(fake.PowerStateKey)
	prepared, _ := t.InternalString(fake.BootPreparedKey)
	// Like a real machine, the node boots the ramdisk only from a device
	// that can carry it (the fake BMC's boot device; PXE when none was
	// set): one left on disk boots the disk, whatever was prepared.
	device, ok := t.InternalString(fake.BootDeviceKey)
	if !ok {
		device = string(driver.BootPXE)
	}
	bootable := device == string(driver.BootPXE) || device == string(driver.BootCDROM)
	if state == string(driver.PowerOn) && prepared == "ramdisk" && bootable {
		var macs []string
		for _, port := range t.Ports {
			macs = append(macs, port.Address)
		}
		if params, ok := t.DriverInternalInfo[fake.BootRamdiskParamsKey].(map[string]any); ok {
			if cb, _ := params[InspectionCallbackParam].(string); cb != "" {
				return p.fleet.BootInspection(t.NodeUUID, macs, cb)
			}
		}
		return p.fleet.Boot(t.NodeUUID, macs)
	}
	p.fleet.Halt(t.NodeUUID)
	return nil
}

// GetPowerState reports the fake power state, except that a node whose
// agent powered the machine off (standby.power_off succeeded) reads power
// off, as the BMC of a machine that shut itself down does.
func (p *Power) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	if a := p.fleet.Agent(t.NodeUUID); a != nil && a.IsGone() && a.CommandRuns(agentclient.CmdPowerOff) > 0 {
		if _, err := p.PowerInterface.GetPowerState(ctx, t); err != nil {
			return "", err
		}
		t.SetDriverInternalInfo(fake.PowerStateKey, string(driver.PowerOff))
		p.fleet.Halt(t.NodeUUID)
		return driver.PowerOff, nil
	}
	return p.PowerInterface.GetPowerState(ctx, t)
}

// PowerCall is one out-of-band power action the fleet's power interface
// carried out: its target (a power state, or driver.Reboot) and when.
type PowerCall struct {
	Target driver.PowerState
	At     time.Time
}

// PowerCalls returns the node's out-of-band power actions in order, so a
// test can check them against what the node's agents ran.
func (f *Fleet) PowerCalls(nodeUUID string) []PowerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]PowerCall(nil), f.powerCalls[nodeUUID]...)
}

func (f *Fleet) recordPower(nodeUUID string, target driver.PowerState) {
	f.mu.Lock()
	f.powerCalls[nodeUUID] = append(f.powerCalls[nodeUUID], PowerCall{Target: target, At: time.Now()})
	f.mu.Unlock()
}

// SetPowerState sets the fake power state and boots or halts the ramdisk.
func (p *Power) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	p.fleet.recordPower(t.NodeUUID, target)
	if err := p.PowerInterface.SetPowerState(ctx, t, target, timeout); err != nil {
		return err
	}
	return p.follow(t)
}

// Reboot power-cycles the node: the ramdisk (if prepared) boots afresh.
func (p *Power) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	p.fleet.recordPower(t.NodeUUID, driver.Reboot)
	if err := p.PowerInterface.Reboot(ctx, t, timeout); err != nil {
		return err
	}
	return p.follow(t)
}

var _ driver.PowerInterface = (*Power)(nil)
