package agenttest_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

const (
	rdNode = "6f0b3a52-4f0e-4a53-9f63-0d0c8b1f2a10"
	rdMAC  = "52:54:00:12:34:56"
)

type apiEnv struct {
	url     string
	backend *agenttest.Backend
}

func newAPI(t *testing.T, state string) *apiEnv {
	t.Helper()
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{UUID: rdNode, ProvisionState: statemachine.State(state)}, rdMAC); err != nil {
		t.Fatal(err)
	}
	h, err := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(b.Close)
	return &apiEnv{url: srv.URL, backend: b}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRamdiskEndToEnd(t *testing.T) {
	api := newAPI(t, "clean wait")
	srv, err := agenttest.NewServer(agenttest.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
		APIURL: api.url, MACs: []string{rdMAC}, Server: srv,
		HeartbeatInterval: time.Hour, MinForcedInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- rd.Run(ctx) }()
	// The first heartbeat is immediate.
	eventually(t, "first heartbeat", func() bool { return api.backend.HeartbeatCount(rdNode) == 1 })
	n, _ := api.backend.Node(rdNode)
	if n.AgentURL != srv.AgentURL("525400123456") || n.AgentURL != rd.URL() || n.AgentVerifyCA != srv.CertPEM() {
		t.Fatalf("recorded url %q, cert pinned %v", n.AgentURL, n.AgentVerifyCA == srv.CertPEM())
	}
	if rd.Agent().Token() != n.AgentToken || len(n.AgentToken) != agentclient.TokenLength {
		t.Fatal("the agent did not adopt the token from lookup")
	}
	if rd.NodeUUID() != rdNode || rd.LookupResponse() == nil {
		t.Fatal("lookup result not kept")
	}
	// The conductor side: drive the agent with the recorded data.
	c, _ := agentclient.NewClient(agentclient.ClientConfig{CommandWaitInterval: 5 * time.Millisecond})
	defer c.Close()
	target := agentclient.Agent{NodeUUID: rdNode, URL: n.AgentURL, Token: n.AgentToken, VerifyCA: n.AgentVerifyCA}
	found, err := c.GetCleanSteps(ctx, target, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A finished command forces a heartbeat (the interval is an hour).
	eventually(t, "forced heartbeat", func() bool { return api.backend.HeartbeatCount(rdNode) >= 2 })
	step := found.Steps["GenericHardwareManager"][0]
	if _, err := c.ExecuteCleanStep(ctx, target, step, nil, nil, found.HardwareManagerVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForCommand(ctx, target, agentclient.CmdExecuteCleanStep); err != nil {
		t.Fatal(err)
	}
	eventually(t, "heartbeat after the step", func() bool { return api.backend.HeartbeatCount(rdNode) >= 3 })
	if _, err := c.PowerOff(ctx, target); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after power off")
	}
	if rd.Agent().StepRuns(steps.Clean, step.Interface, step.Name) != 1 {
		t.Fatal("step count")
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	st := rd.Stats()
	if st.Lookups != 1 || st.HeartbeatsAccepted < 3 || st.HeartbeatsSent != st.HeartbeatsAccepted {
		t.Fatalf("stats %+v", st)
	}
}

func TestRamdiskLookupBackoff(t *testing.T) {
	api := newAPI(t, "available") // not a lookup state: 404 until cleaning starts
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
		APIURL: api.url, MACs: []string{rdMAC}, LookupInterval: time.Millisecond, LookupMaxInterval: 4 * time.Millisecond,
		LookupConflictBackoff: []time.Duration{time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		for rd.Stats().Lookups < 3 {
			time.Sleep(time.Millisecond)
		}
		// Now locked: the lookup gets 409 and backs off.
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.ProvisionState = "clean wait"; n.Reservation = "c1" })
		for rd.Stats().Lookups < 6 {
			time.Sleep(time.Millisecond)
		}
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.Reservation = "" })
	}()
	if err := rd.Lookup(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rd.Stats().Lookups; n < 6 {
		t.Fatalf("only %d lookups", n)
	}
	if len(rd.Agent().Token()) != agentclient.TokenLength {
		t.Fatal("token not adopted")
	}
}

func TestRamdiskLookupFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		api := newAPI(t, "active")
		rd, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.url, MACs: []string{rdMAC}, LookupInterval: time.Millisecond, LookupTimeout: 30 * time.Millisecond})
		defer rd.Close()
		if err := rd.Run(context.Background()); !errors.Is(err, agenttest.ErrLookupTimeout) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("masked token without one of its own", func(t *testing.T) {
		api := newAPI(t, "clean wait")
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.AgentToken = "left-over-from-an-earlier-boot-xxxxxxxxxxxx" })
		rd, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.url, MACs: []string{rdMAC}})
		defer rd.Close()
		if err := rd.Run(context.Background()); !errors.Is(err, agenttest.ErrTokenLockout) {
			t.Fatalf("%v", err)
		}
		if !rd.Agent().IsGone() {
			t.Fatal("the agent still serves after a token lockout")
		}
	})
	t.Run("pre-generated token", func(t *testing.T) {
		api := newAPI(t, "clean wait")
		pre, _ := agentclient.NewToken(nil)
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.AgentToken = pre })
		rd, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.url, NodeUUID: rdNode, PregeneratedToken: pre, HeartbeatInterval: time.Hour})
		defer rd.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rd.Run(ctx) }()
		eventually(t, "heartbeat", func() bool { return api.backend.HeartbeatCount(rdNode) == 1 })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// recordingClock fires the first n timers at once and records every wait.
type recordingClock struct {
	mu    sync.Mutex
	waits []time.Duration
	fire  int
}

func (c *recordingClock) Now() time.Time { return time.Now() }

func (c *recordingClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	if len(c.waits) <= c.fire {
		ch <- time.Now()
	}
	return ch
}

func (c *recordingClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

func TestRamdiskHeartbeatTimingDefaults(t *testing.T) {
	api := newAPI(t, "clean wait")
	clock := &recordingClock{fire: 6}
	agent := agenttest.NewAgent(agenttest.AgentConfig{})
	rd, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.url, MACs: []string{rdMAC}, Agent: agent, Clock: clock, Seed: 7})
	defer rd.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rd.Run(ctx) }()
	eventually(t, "six heartbeats", func() bool { return len(clock.recorded()) >= 7 })
	cancel()
	<-done
	w := clock.recorded()
	if w[0] != 0 {
		t.Fatalf("first heartbeat not immediate: %v", w[0])
	}
	// heartbeat_timeout (300 s) × random(0.3, 0.6): 90 to 180 s.
	for _, d := range w[1:7] {
		if d < 90*time.Second || d > 180*time.Second {
			t.Fatalf("heartbeat interval %v outside 90–180 s (all: %v)", d, w)
		}
	}
	if w[1] == w[2] && w[2] == w[3] {
		t.Fatalf("no jitter: %v", w)
	}

	// A refused heartbeat is retried after 5 to 10 s.
	api.backend.Update(rdNode, func(n *agentclient.Node) { n.AgentURL = "https://elsewhere:9999" })
	clock2 := &recordingClock{fire: 4}
	rd2, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.url, MACs: []string{rdMAC}, Agent: agenttest.NewAgent(agenttest.AgentConfig{}), Clock: clock2, PregeneratedToken: "x"})
	defer rd2.Close()
	api.backend.Update(rdNode, func(n *agentclient.Node) { n.AgentToken = "x" })
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- rd2.Run(ctx2) }()
	eventually(t, "retries", func() bool { return len(clock2.recorded()) >= 4 })
	cancel2()
	<-done
	for _, d := range clock2.recorded()[1:4] {
		if d < 5*time.Second || d > 10*time.Second {
			t.Fatalf("retry after %v, want 5–10 s", d)
		}
	}
	if st := rd2.Stats(); st.HeartbeatsSent < 3 || st.HeartbeatsAccepted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNewRamdiskValidation(t *testing.T) {
	if _, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{MACs: []string{rdMAC}}); err == nil {
		t.Fatal("no APIURL accepted")
	}
	if _, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: "http://x"}); err == nil {
		t.Fatal("nothing to look up by accepted")
	}
}

// TestRamdiskForcedHeartbeatKeepsThePeriodicOne checks that a heartbeat
// forced by a finished command but held back by MinForcedInterval does
// not delay the periodic heartbeat: IPA checks both every few seconds,
// so its periodic heartbeat comes when due whatever a command did.
func TestRamdiskForcedHeartbeatKeepsThePeriodicOne(t *testing.T) {
	api := newAPI(t, "clean wait")
	srv, err := agenttest.NewServer(agenttest.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
		APIURL: api.url, MACs: []string{rdMAC}, Server: srv,
		HeartbeatInterval: 200 * time.Millisecond, MinForcedInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = rd.Run(ctx) }()
	eventually(t, "first heartbeat", func() bool { return api.backend.HeartbeatCount(rdNode) == 1 })
	n, _ := api.backend.Node(rdNode)
	c, _ := agentclient.NewClient(agentclient.ClientConfig{})
	defer c.Close()
	// A command finishes right after the first heartbeat: its forced
	// heartbeat is an hour away, the periodic one 200 ms.
	if _, err := c.GetCleanSteps(ctx, agentclient.Agent{NodeUUID: rdNode, URL: n.AgentURL, Token: n.AgentToken, VerifyCA: n.AgentVerifyCA}, nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "periodic heartbeats after the command", func() bool { return api.backend.HeartbeatCount(rdNode) >= 3 })
}

// TestRamdiskOverIPv6: the agent API and the agent both on [::1]. The
// ramdisk's lookup and heartbeats reach the API at an ipa-api-url with
// a bracketed literal, its callback_url is recorded bracketed, and the
// conductor's client drives the agent through it (TLS pinned to the
// agent's certificate, whose address is ::1).
func TestRamdiskOverIPv6(t *testing.T) {
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{UUID: rdNode, ProvisionState: "clean wait"}, rdMAC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	h, err := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	api := httptest.NewUnstartedServer(h)
	api.Listener.Close()
	api.Listener = ln
	api.Start()
	t.Cleanup(api.Close)
	if !strings.HasPrefix(api.URL, "http://[::1]:") {
		t.Fatalf("API at %s", api.URL)
	}
	srv, err := agenttest.NewServer(agenttest.ServerConfig{Addr: "[::1]:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
		APIURL: api.URL, MACs: []string{rdMAC}, Server: srv,
		HeartbeatInterval: time.Hour, MinForcedInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- rd.Run(ctx) }()
	eventually(t, "first heartbeat over IPv6", func() bool { return b.HeartbeatCount(rdNode) == 1 })
	n, _ := b.Node(rdNode)
	if !strings.HasPrefix(n.AgentURL, "https://[::1]:") {
		t.Fatalf("recorded agent_url %q, want https://[::1]:port", n.AgentURL)
	}
	c, _ := agentclient.NewClient(agentclient.ClientConfig{CommandWaitInterval: 5 * time.Millisecond})
	defer c.Close()
	target := agentclient.Agent{NodeUUID: rdNode, URL: n.AgentURL, Token: n.AgentToken, VerifyCA: n.AgentVerifyCA}
	if _, err := c.GetCleanSteps(ctx, target, nil, nil); err != nil {
		t.Fatalf("the conductor's client over IPv6: %v", err)
	}
	eventually(t, "forced heartbeat over IPv6", func() bool { return b.HeartbeatCount(rdNode) >= 2 })
	cancel()
	<-runErr
}
