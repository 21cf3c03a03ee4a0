package conductor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestTakeoverWaitsForAgent is the end-to-end proof of the takeover rules
// that leave a node waiting for its agent (takeover.go, resumable rules 2
// and 3): two conductors share a SQLite store and a fleet of simulated
// ramdisks reached through an agent API router that sends every agent to
// its node's owner. Conductor a dies (freezes, holding the reservation)
// while it hands a step to the agent of its node, which receives it and
// runs it; b takes the node over:
//
//   - an in-band clean step (the agent's own), with the agent unreachable
//     at takeover (its URL answers 404 and its heartbeats reach nobody):
//     b leaves the node in clean wait instead of failing it; the agent
//     comes back and heartbeats to b, and the clean completes (available);
//   - the direct interface's write_image (declared by the interface, not
//     safe to re-run, handed to the agent), the agent alive at takeover:
//     it knows the step, so b leaves the node in deploy wait; the agent's
//     next heartbeat reaches b and the deploy completes (active).
//
// Neither step runs twice on the agent, and the dead conductor's late
// write is fenced off.
func TestTakeoverWaitsForAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		kind    steps.Kind
		command string // the agent command a dies sending
		step    string // its step; "" for the first one sent
		gone    bool   // the agent is unreachable at takeover
	}{
		{"in-band clean step, agent unreachable at takeover", steps.Clean, "execute_clean_step", "", true},
		{"write_image handed to the agent, agent alive at takeover", steps.Deploy, "execute_deploy_step", agentdeploy.StepWriteImage, false},
	} {
		t.Run(tc.name, func(t *testing.T) { takeoverWaitsForAgent(t, tc.kind, tc.command, tc.step, tc.gone) })
	}
}

func takeoverWaitsForAgent(t *testing.T, kind steps.Kind, command, stepName string, gone bool) {
	ctx := context.Background()
	// Only the store's clock moves: it alone decides who is alive. The
	// conductors' clocks never move, so their periodic tasks and
	// keepalives run only when the test calls them.
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	agents, err := agenttest.NewServer(agenttest.ServerConfig{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	link := newFreezeLink(t, agents.URL())
	t.Cleanup(func() { _ = agents.Close() })
	router := newAgentRouter()
	api := httptest.NewServer(router)
	t.Cleanup(api.Close)
	fleet, err := simfleet.New(simfleet.Config{APIURL: api.URL, Server: agents, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })

	cl := conductor.ClusterOptions{Notifier: baremetal.NewLocalNotifier()}
	a := startAgentMember(t, s, "a", fleet, link.dial, cl)
	b := startAgentMember(t, s, "b", fleet, nil, cl)
	router.add("a", a)
	router.add("b", b)
	router.route(b) // b's rings route the agents: b outlives a
	waitAlive(t, a, 2)
	waitAlive(t, b, 2)

	n := agentNodeOwnedBy(t, b, "a")
	// Verbs go to b; a, the owner, executes them.
	if err := b.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, n.UUID, statemachine.Manageable)
	running, waiting, final := statemachine.Cleaning, statemachine.CleanWait, statemachine.Available
	verb := func() error { return b.Provide(ctx, n.UUID) }
	current := func(n *baremetal.Node) map[string]any { return n.CleanStep }
	if kind == steps.Deploy {
		if err := b.Provide(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		waitState(t, s, n.UUID, statemachine.Available)
		running, waiting, final = statemachine.Deploying, statemachine.DeployWait, statemachine.Active
		verb = func() error { return b.Deploy(ctx, n.UUID, conductor.DeployOptions{}) }
		current = func(n *baremetal.Node) map[string]any { return n.DeployStep }
	}

	// a dies while it sends the step: the agent receives the command and
	// runs the step, a never hears back.
	link.arm(command, stepName)
	if err := verb(); err != nil {
		t.Fatal(err)
	}
	var step steps.Step
	select {
	case step = <-link.frozen:
	case <-time.After(20 * time.Second):
		got, _ := s.GetNode(ctx, n.UUID)
		t.Fatalf("conductor a never sent %s %s (node %s, reserved by %q, step %v, last error %q)",
			command, stepName, got.ProvisionState, got.Reservation, current(got), got.LastError)
	}
	mid, err := s.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if mid.ProvisionState != running || mid.Reservation != "a" ||
		current(mid)["interface"] != step.Interface || current(mid)["step"] != step.Name {
		t.Fatalf("mid-step node: %s reserved by %q step %v; want %s, reserved by a, at %s",
			mid.ProvisionState, mid.Reservation, current(mid), running, step.Key())
	}
	agent := fleet.Agent(n.UUID)
	if agent == nil {
		t.Fatal("no agent runs on the node mid-step")
	}
	router.kill("a")
	agentID := strings.ToLower(n.UUID)
	if gone {
		// The agent goes away with a: its URL answers 404 and its
		// heartbeats reach no conductor.
		agents.Unregister(agentID)
		router.mute(n.UUID, true)
	}

	// a's keepalive ages past the heartbeat timeout; b takes over.
	clock.Advance(61 * time.Second)
	if err := s.KeepaliveConductor(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	// The orphan check runs as its periodic task would: a pass that lists
	// the nodes while one of the agent's heartbeats holds this node for a
	// moment does not see it as interrupted, and the next pass takes it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		b.CheckOrphanNodes(ctx)
		cur, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.ProvisionState != running || cur.Reservation != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if gone {
		held := waitState(t, s, n.UUID, waiting)
		if held.LastError != "" || held.Maintenance || current(held)["step"] != step.Name {
			t.Fatalf("node taken over with the agent gone: last_error %q, maintenance %v, step %v; want no error, still at %s",
				held.LastError, held.Maintenance, current(held), step.Key())
		}
		// The agent comes back and heartbeats to its node's new owner.
		if _, err := agents.Register(agentID, agent); err != nil {
			t.Fatal(err)
		}
		router.mute(n.UUID, false)
	}
	done := waitState(t, s, n.UUID, final)
	if done.LastError != "" || done.Maintenance {
		t.Errorf("node %s has last_error %q, maintenance %v", final, done.LastError, done.Maintenance)
	}
	if !historyHas(t, s, n.UUID, "reservation of dead conductor a released by conductor b") {
		t.Errorf("no history note of the released reservation")
	}
	if !historyHas(t, s, n.UUID, "waiting for the agent") {
		t.Errorf("no history note of the takeover waiting for the agent")
	}
	if runs := agent.StepRuns(kind, step.Interface, step.Name); runs != 1 {
		t.Errorf("%s ran %d times on the agent, want once", step.Key(), runs)
	}
	hs, err := s.ListHistory(ctx, n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var endedBy string
	for _, h := range hs {
		if h.Event == "step_end "+step.Key() {
			endedBy = h.Conductor
		}
	}
	if endedBy != "b" {
		t.Errorf("the end of %s was recorded by %q, want the new owner b", step.Key(), endedBy)
	}
	if got := router.served("b", n.UUID); got == 0 {
		t.Errorf("no request of the node's agent reached b")
	}

	// The frozen conductor wakes up: its late writes are fenced off.
	before, _ := s.GetNode(ctx, n.UUID)
	link.thaw()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = a.Stop(sctx)
	after, _ := s.GetNode(ctx, n.UUID)
	if after.ProvisionState != before.ProvisionState || after.Version != before.Version || after.Reservation != "" {
		t.Fatalf("the dead conductor overwrote the new owner's work: %s v%d -> %s v%d (reserved by %q)",
			before.ProvisionState, before.Version, after.ProvisionState, after.Version, after.Reservation)
	}
}

// startAgentMember starts a cluster conductor whose nodes deploy with the
// direct interface on fleet's simulated ramdisks; dial, when set, carries
// its connections to the agents.
func startAgentMember(t *testing.T, s baremetal.Store, host string, fleet *simfleet.Fleet,
	dial func(context.Context, string, string) (net.Conn, error), cl conductor.ClusterOptions) *conductor.Conductor {
	t.Helper()
	// A long command timeout: a frozen conductor stays frozen.
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: time.Minute, DialContext: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {agentdeploy.Name, fake.Name},
			driver.KindPower:  {simfleet.PowerName, fake.Name},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	return startMemberReg(t, s, host, reg, conductor.AgentSettings{Client: client}, cl,
		conductor.Options{Clock: storetest.NewManualClock(clusterEpoch), Logger: testLogger(t)})
}

// agentNodeOwnedBy enrolls agent-deployed nodes through c until one is
// owned by host.
func agentNodeOwnedBy(t *testing.T, c *conductor.Conductor, host string) *baremetal.Node {
	t.Helper()
	for i := 0; i < 64; i++ {
		n, err := c.Enroll(context.Background(), &baremetal.Node{Driver: builtin.FakeHardware,
			PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name,
			InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}})
		if err != nil {
			t.Fatal(err)
		}
		if owner, err := c.Ownership().OwnerOf(n); err == nil && owner == host {
			return n
		}
	}
	t.Fatalf("no node hashed to %s in 64 tries", host)
	return nil
}

// agentRouter is the agent API of a fleet of conductors, as Ironic's API
// is: an agent's lookup and heartbeats go to the conductor owning its
// node (any live one when the node is not named). A killed conductor
// answers nothing; a muted node's heartbeats reach no conductor (its
// ramdisk is gone).
type agentRouter struct {
	mu       sync.Mutex
	view     *conductor.Conductor
	handlers map[string]http.Handler
	dead     map[string]bool
	muted    map[string]bool
	count    map[string]int // conductor + " " + node -> requests served
	// pinned, when set, receives every agent request, whoever owns the
	// node: a router whose rings disagree with the conductors' (an API
	// that saw a membership change before they did).
	pinned string
}

func newAgentRouter() *agentRouter {
	return &agentRouter{handlers: map[string]http.Handler{}, dead: map[string]bool{}, muted: map[string]bool{}, count: map[string]int{}}
}

func (r *agentRouter) add(host string, c *conductor.Conductor) {
	// The agents serve plain HTTP, so that the freezeLink can read the
	// commands it holds.
	h, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{AllowInsecureCallback: true})
	if err != nil {
		panic(err) // this HandlerConfig is valid
	}
	r.mu.Lock()
	r.handlers[host] = h
	r.mu.Unlock()
}

// route makes c's rings decide the owners.
func (r *agentRouter) route(c *conductor.Conductor) {
	r.mu.Lock()
	r.view = c
	r.mu.Unlock()
}

// pin sends every agent request to host.
func (r *agentRouter) pin(host string) {
	r.mu.Lock()
	r.pinned = host
	r.mu.Unlock()
}

func (r *agentRouter) kill(host string) {
	r.mu.Lock()
	r.dead[host] = true
	r.mu.Unlock()
}

func (r *agentRouter) mute(node string, on bool) {
	r.mu.Lock()
	r.muted[strings.ToLower(node)] = on
	r.mu.Unlock()
}

func (r *agentRouter) served(host, node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[host+" "+strings.ToLower(node)]
}

func (r *agentRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	node := req.URL.Query().Get("node_uuid")
	if rest, ok := strings.CutPrefix(req.URL.Path, "/v1/heartbeat/"); ok {
		node = strings.Trim(rest, "/")
	}
	node = strings.ToLower(node)
	r.mu.Lock()
	view, muted := r.view, r.muted[node]
	r.mu.Unlock()
	if muted {
		http.Error(w, `{"error_message": "unreachable"}`, http.StatusServiceUnavailable)
		return
	}
	host := ""
	if node != "" && view != nil {
		host, _ = view.NodeOwner(req.Context(), node)
	}
	r.mu.Lock()
	if r.pinned != "" {
		host = r.pinned
	}
	r.mu.Unlock()
	r.mu.Lock()
	if host == "" {
		live := make([]string, 0, len(r.handlers))
		for h := range r.handlers {
			if !r.dead[h] {
				live = append(live, h)
			}
		}
		sort.Strings(live)
		if len(live) > 0 {
			host = live[0]
		}
	}
	h, dead := r.handlers[host], r.dead[host]
	if h != nil && !dead {
		r.count[host+" "+node]++
	}
	r.mu.Unlock()
	if h == nil || dead {
		http.Error(w, `{"error_message": "conductor unreachable"}`, http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, req)
}

// freezeLink carries one conductor's agent connections (through its
// client's DialContext) to the agents' server. Once armed, it forwards the
// next matching step command to the agent and then never answers it: the
// conductor is frozen mid-call, holding the node, as a conductor that died
// there; the step is sent on frozen. thaw (also run at cleanup) drops the
// held call.
type freezeLink struct {
	proxy    *httputil.ReverseProxy
	addr     string
	mu       sync.Mutex
	armed    bool
	command  string // command name, e.g. execute_clean_step
	step     string // step name; "" for any
	frozen   chan steps.Step
	thawCh   chan struct{}
	thawOnce sync.Once
}

func newFreezeLink(t *testing.T, target string) *freezeLink {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &freezeLink{proxy: httputil.NewSingleHostReverseProxy(u), frozen: make(chan steps.Step, 1), thawCh: make(chan struct{})}
	srv := httptest.NewServer(f)
	f.addr = srv.Listener.Addr().String()
	t.Cleanup(srv.Close)
	t.Cleanup(f.thaw) // before srv.Close, which waits for the held call
	return f
}

func (f *freezeLink) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.addr)
}

// arm holds the next command named command (without its extension) for
// step (any step when "").
func (f *freezeLink) arm(command, step string) {
	f.mu.Lock()
	f.armed, f.command, f.step = true, command, step
	f.mu.Unlock()
}

func (f *freezeLink) thaw() { f.thawOnce.Do(func() { close(f.thawCh) }) }

func (f *freezeLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/v1/commands") {
		f.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var cmd struct {
		Name   string `json:"name"`
		Params struct {
			Step struct {
				Interface string `json:"interface"`
				Step      string `json:"step"`
			} `json:"step"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &cmd)
	f.mu.Lock()
	_, name, _ := strings.Cut(cmd.Name, ".")
	hold := f.armed && name == f.command && cmd.Params.Step.Step != "" && (f.step == "" || cmd.Params.Step.Step == f.step)
	if hold {
		f.armed = false
	}
	f.mu.Unlock()
	if !hold {
		f.proxy.ServeHTTP(w, r)
		return
	}
	// The agent gets the command and starts the step; its answer never
	// reaches the conductor.
	f.proxy.ServeHTTP(httptest.NewRecorder(), r)
	f.frozen <- steps.Step{Interface: cmd.Params.Step.Interface, Name: cmd.Params.Step.Step}
	select {
	case <-f.thawCh:
	case <-r.Context().Done():
	}
	panic(http.ErrAbortHandler) // the connection drops, as a dead link does
}
