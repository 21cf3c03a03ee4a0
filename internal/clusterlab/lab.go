// Package clusterlab is a laboratory for several Anvil conductors sharing
// one PostgreSQL database: the machines they manage (a BMC endpoint that
// boots simulated ramdisks with agenttest), the agent API router that sends
// each agent's lookup and heartbeats to the conductor owning its node (what
// Ironic's API does with its hash ring), and the conductor process itself
// (RunConductor, built as cmd/labconductor). The machines live in the lab's
// process, not in the conductors', so killing a conductor does not kill
// the ramdisks it booted: exactly the situation of a conductor host dying
// in a real fleet. With a plugin directory (ConductorConfig.PluginDir,
// -plugin-dir), a conductor keeps its machines' power state through the
// fake driver plugin (plugins/fake) run out of process under its
// driver/plugin host, so the chaos test can SIGKILL a plugin process too.
// With ConductorConfig.IPMIConsole (-ipmi-console), a conductor also
// serves ipmi nodes (EnrollIPMINode) with the ipmitool-socat console, its
// consoles running in the conductor's process, so the console takeover
// test can SIGKILL a conductor running a console.
//
// The chaos and console takeover tests of this package and
// examples/multiconductor use it.
package clusterlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
)

// LabConfig configures a Lab.
type LabConfig struct {
	// Store is the fleet's database, read to route agents to owners.
	Store baremetal.ConductorStore
	// Ring must match the conductors' ring options.
	Ring conductor.RingOptions
	// Notifier, when set, makes the router follow membership changes at
	// once; it refreshes every RouteRefresh anyway.
	Notifier baremetal.ClusterNotifier
	// RouteRefresh paces the router's ring rebuilds; 0 means 250 ms.
	RouteRefresh time.Duration
	// HeartbeatInterval, LookupInterval and RetryInterval pace the agents;
	// zero means 300 ms, 50 ms and 100 ms.
	HeartbeatInterval time.Duration
	LookupInterval    time.Duration
	RetryInterval     time.Duration
	// CommandDelay is how long agent commands run; 0 means 20 ms.
	CommandDelay time.Duration
	// Logger receives the lab's notes; nil discards.
	Logger *slog.Logger
}

// Boot is one boot of a node into the ramdisk, with the agent that ran.
type Boot struct {
	Node    string
	At      time.Time
	agent   *agenttest.Agent
	rd      *agenttest.Ramdisk
	cancel  context.CancelFunc
	done    chan struct{}
	stopped time.Time
	// runErr and ended are how and when the ramdisk's run ended, set
	// before done closes.
	runErr error
	ended  time.Time
}

// LockedOut reports whether the boot's agent locked itself out (its
// lookup answered the masked token while it had none, as IPA does when
// the token was disclosed to a lookup whose answer it never received),
// and when.
func (b *Boot) LockedOut() (bool, time.Time) {
	select {
	case <-b.done:
	default:
		return false, time.Time{}
	}
	return errors.Is(b.runErr, agenttest.ErrTokenLockout), b.ended
}

// Stats returns the boot's ramdisk counters.
func (b *Boot) Stats() agenttest.RamdiskStats { return b.rd.Stats() }

// Executions returns what the boot's agent ran.
func (b *Boot) Executions() []agenttest.Execution { return b.agent.Executed() }

// PowerCall is one call a conductor made to a node's BMC.
type PowerCall struct {
	Node      string
	Conductor string
	On        bool
	Ramdisk   bool
	At        time.Time
}

// Lab hosts the machines of a fleet and routes their agents. It is safe
// for concurrent use; Close stops it.
type Lab struct {
	cfg    LabConfig
	log    *slog.Logger
	agents *agenttest.Server
	own    *conductor.Ownership
	ln     net.Listener
	srv    *http.Server
	hc     *http.Client
	// agentHC is the agents' HTTP client and proxyTransport the
	// router's way to the conductors: shared, each keeping enough idle
	// connections for a whole fleet, so that hundreds of agents
	// heartbeating every second do not open a connection per request
	// (and exhaust the loopback's ephemeral ports with TIME_WAIT).
	agentHC        *http.Client
	proxyTransport *http.Transport
	cancel         context.CancelFunc
	wg             sync.WaitGroup

	mu         sync.Mutex
	conductors map[string]*url.URL
	running    map[string]*Boot
	boots      map[string][]*Boot
	power      []PowerCall
	// machines is each node's power as its BMC reads it, known once a
	// conductor set it: on, or off (set off, or powered off by its
	// agent's standby.power_off, as IPA does).
	machines map[string]bool
	routed   map[string]int
	// refusals counts, per node, the agent requests the router answered
	// itself (no live conductor, or the conductor unreachable), with the
	// last reason.
	refusals    map[string]int
	lastRefusal map[string]string
	// lostLookups are, per node, the lookups a conductor took but never
	// answered: the connection to it failed after the request was sent.
	lostLookups map[string][]LostLookup
	// calls are, per node, its agents' last requests and their answers
	// (at most maxAgentCalls), for the timeline of a node that failed.
	calls  map[string][]AgentCall
	closed bool

	// bmcLocks holds a *sync.Mutex per node: a machine's BMC carries out
	// one power request at a time, as a real one does.
	bmcLocks sync.Map
}

// maxAgentCalls bounds the agent requests kept per node.
const maxAgentCalls = 256

// AgentCall is one request of a node's agent the router passed on (or
// answered itself): when it came, what it was, where it went, and the
// answer's status (0: the agent went away before the answer).
type AgentCall struct {
	At        time.Time
	Took      time.Duration
	Op        string // "lookup" or "heartbeat"
	Conductor string // "" when the router answered itself
	Status    int
}

// LostLookup is an agent's lookup the router passed to a conductor that
// never answered it: the conductor's connection failed after the request
// went out (the conductor died mid-request, say), so the agent got the
// router's 503 instead of the conductor's answer, whatever the conductor
// had done with it.
type LostLookup struct {
	// Sent is when the request was first written to the conductor, At
	// when the router saw the connection fail: a conductor killed while
	// it held the request lies between the two, however late the
	// router's own goroutines noticed on a loaded machine.
	Sent      time.Time
	At        time.Time
	Conductor string
	Err       string
}

// NewLab starts the lab's HTTP server on a free loopback port.
func NewLab(cfg LabConfig) (*Lab, error) {
	if cfg.RouteRefresh <= 0 {
		cfg.RouteRefresh = 250 * time.Millisecond
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 300 * time.Millisecond
	}
	if cfg.LookupInterval <= 0 {
		cfg.LookupInterval = 50 * time.Millisecond
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 100 * time.Millisecond
	}
	if cfg.CommandDelay <= 0 {
		cfg.CommandDelay = 20 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	own, err := conductor.NewOwnership(cfg.Store, "", "", cfg.Ring, nil, log)
	if err != nil {
		return nil, err
	}
	agents, err := agenttest.NewServer(agenttest.ServerConfig{})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = agents.Close()
		return nil, err
	}
	l := &Lab{cfg: cfg, log: log, agents: agents, own: own, ln: ln,
		hc:             &http.Client{Timeout: 10 * time.Second},
		agentHC:        &http.Client{Timeout: 30 * time.Second, Transport: fleetTransport()},
		proxyTransport: fleetTransport(),
		conductors:     map[string]*url.URL{}, running: map[string]*Boot{}, boots: map[string][]*Boot{}, routed: map[string]int{},
		refusals: map[string]int{}, lastRefusal: map[string]string{}, lostLookups: map[string][]LostLookup{},
		machines: map[string]bool{}, calls: map[string][]AgentCall{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bmc/{node}", l.serveBMC)
	mux.HandleFunc("GET /bmc/{node}", l.serveBMCState)
	// Agent API requests reach serveAgentAPI without a ServeMux in front,
	// which would redirect paths such as /v1/heartbeat/. instead of
	// passing them on to the conductor's handler.
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/bmc/") {
			mux.ServeHTTP(w, r)
			return
		}
		l.serveAgentAPI(w, r)
	})
	l.srv = agentclient.NewServer(root, agentclient.ServerConfig{ReadHeaderTimeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if _, err := own.Refresh(ctx); err != nil {
		log.Warn("first route refresh failed", "error", err)
	}
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		_ = l.srv.Serve(ln)
	}()
	go func() {
		defer l.wg.Done()
		l.refreshRoutes(ctx)
	}()
	return l, nil
}

// refreshRoutes keeps the router's rings current.
func (l *Lab) refreshRoutes(ctx context.Context) {
	var wake <-chan string
	if l.cfg.Notifier != nil {
		ch, stop := l.cfg.Notifier.Subscribe(baremetal.TopicMembership)
		defer stop()
		wake = ch
	}
	t := time.NewTicker(l.cfg.RouteRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		if _, err := l.own.Refresh(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("route refresh failed", "error", err)
		}
	}
}

// URL is the lab's base URL: conductors call <URL>/bmc/<node>, agents
// use it as their API URL.
func (l *Lab) URL() string { return "http://" + l.ln.Addr().String() }

// SetConductor records where conductor host serves its agent API.
func (l *Lab) SetConductor(host, agentAPI string) error {
	u, err := url.Parse(agentAPI)
	if err != nil {
		return fmt.Errorf("clusterlab: conductor %s agent API: %w", host, err)
	}
	l.mu.Lock()
	l.conductors[host] = u
	l.mu.Unlock()
	return nil
}

// bmcRequest is what the lab power interface sends.
type bmcRequest struct {
	On        bool     `json:"on"`
	Ramdisk   bool     `json:"ramdisk"`
	MACs      []string `json:"macs"`
	Conductor string   `json:"conductor"`
}

func (l *Lab) serveBMC(w http.ResponseWriter, r *http.Request) {
	node := strings.ToLower(r.PathValue("node"))
	var req bmcRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad BMC request: "+err.Error(), http.StatusBadRequest)
		return
	}
	// Two conductors (the old owner's late retry and the new owner's
	// takeover) may power the machine within milliseconds: the second
	// request waits for the first, and then resets the machine as a
	// real BMC would, instead of failing because the first boot's agent
	// still held the machine's place in the agent server.
	v, _ := l.bmcLocks.LoadOrStore(node, new(sync.Mutex))
	bmc := v.(*sync.Mutex)
	bmc.Lock()
	defer bmc.Unlock()
	l.mu.Lock()
	l.power = append(l.power, PowerCall{Node: node, Conductor: req.Conductor, On: req.On, Ramdisk: req.Ramdisk, At: time.Now()})
	l.machines[node] = req.On
	l.mu.Unlock()
	l.halt(node)
	if req.On && req.Ramdisk {
		if err := l.boot(node, req.MACs); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// bmcState is what GET /bmc/<node> answers: whether the lab knows the
// machine's power (a conductor set it), and whether it is on.
type bmcState struct {
	Known bool `json:"known"`
	On    bool `json:"on"`
}

func (l *Lab) serveBMCState(w http.ResponseWriter, r *http.Request) {
	node := strings.ToLower(r.PathValue("node"))
	l.mu.Lock()
	on, known := l.machines[node]
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(bmcState{Known: known, On: on})
}

// MachineOn reports whether node's machine is powered on, as its BMC reads
// it, and whether the lab knows (a conductor set its power).
func (l *Lab) MachineOn(node string) (on, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	on, known = l.machines[strings.ToLower(node)]
	return on, known
}

// fleetTransport is an HTTP transport for the traffic of a whole fleet to
// a few loopback addresses.
func fleetTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2048
	tr.MaxIdleConnsPerHost = 1024
	return tr
}

func (l *Lab) boot(node string, macs []string) error {
	agent := agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: l.cfg.CommandDelay})
	ri := l.cfg.RetryInterval
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
		APIURL: l.URL(), MACs: macs, NodeUUID: node, Agent: agent, Server: l.agents, HTTPClient: l.agentHC,
		LookupInterval: l.cfg.LookupInterval, LookupMaxInterval: 4 * l.cfg.LookupInterval, LookupTimeout: 10 * time.Minute,
		LookupConflictBackoff: []time.Duration{ri, ri, 2 * ri}, HeartbeatInterval: l.cfg.HeartbeatInterval,
		HeartbeatRetryMin: ri, HeartbeatRetryMax: 2 * ri, MinForcedInterval: l.cfg.LookupInterval,
	})
	if err != nil {
		return fmt.Errorf("clusterlab: boot %s: %w", node, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Boot{Node: node, At: time.Now(), agent: agent, rd: rd, cancel: cancel, done: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		_ = rd.Close()
		return fmt.Errorf("clusterlab: closed")
	}
	l.running[node] = b
	l.boots[node] = append(l.boots[node], b)
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(b.done)
		b.runErr = rd.Run(ctx)
		b.ended = time.Now()
	}()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.followAgent(ctx, b)
	}()
	return nil
}

// followAgent powers the machine of boot b off when its agent powered it
// off (standby.power_off succeeded), as IPA does: the agent runs
// poweroff, so the BMC reads power off from then on and the ramdisk is
// gone. It returns when b ends (halted by a power action) or its agent
// went away otherwise (run_image, lockdown, finalize_rescue), which leaves
// the machine on.
func (l *Lab) followAgent(ctx context.Context, b *Boot) {
	select {
	case <-ctx.Done():
		return
	case <-b.agent.Gone():
	}
	if b.agent.CommandRuns(agentclient.CmdPowerOff) == 0 {
		return
	}
	l.mu.Lock()
	if l.running[b.Node] != b {
		// A power action replaced or halted this boot meanwhile: the BMC
		// reads what that action set.
		l.mu.Unlock()
		return
	}
	delete(l.running, b.Node)
	l.machines[b.Node] = false
	l.mu.Unlock()
	b.cancel()
	<-b.done
	_ = b.rd.Close()
	b.stopped = time.Now()
}

func (l *Lab) halt(node string) {
	l.mu.Lock()
	b := l.running[node]
	delete(l.running, node)
	l.mu.Unlock()
	if b == nil {
		return
	}
	b.cancel()
	<-b.done
	_ = b.rd.Close()
	b.stopped = time.Now()
}

// serveAgentAPI routes an agent's request to the conductor that owns its
// node (any live one for a lookup without a node), as Ironic's API does.
func (l *Lab) serveAgentAPI(w http.ResponseWriter, r *http.Request) {
	node := r.URL.Query().Get("node_uuid")
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/heartbeat/"); ok {
		node = strings.Trim(rest, "/")
	}
	host, target := l.route(node)
	sw := &statusWriter{ResponseWriter: w}
	w = sw
	defer l.recordCall(node, r.URL.Path, host, time.Now(), sw)
	if target == nil {
		l.refused(node, r.URL.Path+": no conductor available")
		http.Error(w, `{"error_message": "no conductor available for the node"}`, http.StatusServiceUnavailable)
		return
	}
	// sent says the request reached the conductor (it was written on a
	// connection to it) in one of the transport's attempts: a GET whose
	// reused connection died mid-request is tried again on a new one,
	// so the error the proxy sees can be the retry's refused dial.
	var sent atomic.Bool
	var sentAt time.Time // written once, before sent is set
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil && !sent.Load() {
			sentAt = time.Now()
			sent.Store(true)
		}
	}}
	p := &httputil.ReverseProxy{
		Transport: l.proxyTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			if pr.Out.URL.Path == "/v1/lookup" {
				pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), trace))
			}
		},
		ErrorLog: nil,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			l.refused(node, r.URL.Path+": "+target.Host+": "+err.Error())
			if sent.Load() && r.Context().Err() == nil {
				l.lostLookup(node, host, sentAt, err)
			}
			http.Error(w, `{"error_message": "conductor unreachable"}`, http.StatusServiceUnavailable)
		},
	}
	p.ServeHTTP(w, r)
}

// statusWriter remembers the status of the answer written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// recordCall keeps an agent request of node in its trail.
func (l *Lab) recordCall(node, path, host string, at time.Time, sw *statusWriter) {
	if node == "" {
		return
	}
	op := "heartbeat"
	if path == "/v1/lookup" {
		op = "lookup"
	}
	node = strings.ToLower(node)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := append(l.calls[node], AgentCall{At: at, Took: time.Since(at), Op: op, Conductor: host, Status: sw.status})
	if len(c) > maxAgentCalls {
		c = c[len(c)-maxAgentCalls:]
	}
	l.calls[node] = c
}

// AgentCalls returns the last requests of node's agents, oldest first.
func (l *Lab) AgentCalls(node string) []AgentCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]AgentCall(nil), l.calls[strings.ToLower(node)]...)
}

// route returns the conductor to send node's agent request to, and
// where it serves the agent API.
func (l *Lab) route(node string) (string, *url.URL) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if node != "" {
		if n, err := l.nodeForRoute(node); err == nil {
			if host, err := l.own.OwnerOf(n); err == nil {
				if u := l.conductors[host]; u != nil {
					l.routed[host]++
					return host, u
				}
			}
		}
	}
	for _, host := range l.own.Alive() {
		if u := l.conductors[host]; u != nil {
			return host, u
		}
	}
	return "", nil
}

func (l *Lab) lostLookup(node, host string, sent time.Time, err error) {
	if node == "" {
		return
	}
	l.mu.Lock()
	l.lostLookups[node] = append(l.lostLookups[node], LostLookup{Sent: sent, At: time.Now(), Conductor: host, Err: err.Error()})
	l.mu.Unlock()
}

// LostLookups returns the lookups of node's agents that a conductor took
// but never answered, oldest first.
func (l *Lab) LostLookups(node string) []LostLookup {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LostLookup(nil), l.lostLookups[strings.ToLower(node)]...)
}

// nodeForRoute builds the ring key of a node: the lab's fleet is one
// hardware type in the default group, which is what routing needs.
func (l *Lab) nodeForRoute(uuid string) (*baremetal.Node, error) {
	return &baremetal.Node{UUID: uuid, Driver: LabHardwareType}, nil
}

// Boots returns the boots of a node so far, oldest first.
func (l *Lab) Boots(node string) []*Boot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Boot(nil), l.boots[strings.ToLower(node)]...)
}

// PowerCalls returns every BMC call so far.
func (l *Lab) PowerCalls() []PowerCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]PowerCall(nil), l.power...)
}

func (l *Lab) refused(node, why string) {
	if node == "" {
		return
	}
	l.mu.Lock()
	l.refusals[node]++
	l.lastRefusal[node] = why
	l.mu.Unlock()
}

// Refusals returns how many of node's agent requests the router answered
// itself (no conductor, or the conductor unreachable), and the last
// reason.
func (l *Lab) Refusals(node string) (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	node = strings.ToLower(node)
	return l.refusals[node], l.lastRefusal[node]
}

// Routed returns how many agent requests went to each conductor.
func (l *Lab) Routed() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.routed {
		out[k] = v
	}
	return out
}

// Owner returns the conductor the router currently sends node's agent to.
func (l *Lab) Owner(node string) string {
	n, _ := l.nodeForRoute(node)
	h, _ := l.own.OwnerOf(n)
	return h
}

// Close halts every ramdisk and stops the servers.
func (l *Lab) Close() error {
	l.mu.Lock()
	l.closed = true
	nodes := make([]string, 0, len(l.running))
	for n := range l.running {
		nodes = append(nodes, n)
	}
	l.mu.Unlock()
	for _, n := range nodes {
		l.halt(n)
	}
	l.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	l.wg.Wait()
	l.agentHC.CloseIdleConnections()
	l.proxyTransport.CloseIdleConnections()
	if cerr := l.agents.Close(); err == nil {
		err = cerr
	}
	return err
}
