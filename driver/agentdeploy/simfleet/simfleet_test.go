package simfleet_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
)

// TestOwnAddresses: with OwnAddresses each node's agent is served on its
// own loopback address with its own certificate, its lookups and
// heartbeats come from that address, and the conductor's client reaches
// each agent there through the pinned certificate.
func TestOwnAddresses(t *testing.T) {
	nodes := map[string]string{
		"6f0b3a52-4f0e-4a53-9f63-0d0c8b1f2a10": "52:54:00:12:34:56",
		"0c8b1f2a-4f0e-4a53-9f63-6f0b3a524f0e": "52:54:00:12:34:57",
	}
	b := agenttest.NewBackend()
	t.Cleanup(b.Close)
	for uuid, mac := range nodes {
		if err := b.AddNode(agentclient.Node{UUID: uuid, ProvisionState: "clean wait"}, mac); err != nil {
			t.Fatal(err)
		}
	}
	h, err := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	from := map[netip.Addr]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			mu.Lock()
			from[ap.Addr()]++
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	fleet, err := simfleet.New(simfleet.Config{APIURL: api.URL, OwnAddresses: true, HeartbeatInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	if fleet.Server() != nil {
		t.Error("Server() is not nil with OwnAddresses")
	}
	for uuid, mac := range nodes {
		if err := fleet.Boot(uuid, []string{mac}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := agentclient.NewClient(agentclient.ClientConfig{CommandWaitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[netip.Addr]bool{}
	certs := map[string]bool{}
	for uuid := range nodes {
		deadline := time.Now().Add(10 * time.Second)
		for b.HeartbeatCount(uuid) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("node %s never heartbeated", uuid)
			}
			time.Sleep(5 * time.Millisecond)
		}
		addr := fleet.Addr(uuid)
		if !addr.IsValid() || !netip.MustParsePrefix("127.0.0.0/8").Contains(addr) || addr == netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("node %s has address %v, want one of its own in 127/8", uuid, addr)
		}
		if seen[addr] {
			t.Fatalf("address %v given twice", addr)
		}
		seen[addr] = true
		n, _ := b.Node(uuid)
		u, err := url.Parse(n.AgentURL)
		if err != nil || u.Hostname() != addr.String() {
			t.Errorf("node %s agent_url %q, want it on %v", uuid, n.AgentURL, addr)
		}
		certs[n.AgentVerifyCA] = true
		mu.Lock()
		got := from[addr]
		mu.Unlock()
		if got < 2 { // lookup and heartbeat
			t.Errorf("node %s: %d API calls from %v, want its lookup and heartbeat", uuid, got, addr)
		}
		target := agentclient.Agent{NodeUUID: uuid, URL: n.AgentURL, Token: n.AgentToken, VerifyCA: n.AgentVerifyCA}
		if _, err := c.GetCleanSteps(context.Background(), target, nil, nil); err != nil {
			t.Errorf("node %s: the conductor's client: %v", uuid, err)
		}
	}
	// A reboot serves the agent at the same URL (its address and the
	// fleet's port), as a real machine's IPA on port 9999.
	for uuid, mac := range nodes {
		before, _ := b.Node(uuid)
		fleet.Halt(uuid)
		if err := fleet.Boot(uuid, []string{mac}); err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(before.AgentURL)
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Errorf("node %s after a reboot: nothing at its agent_url %s: %v", uuid, before.AgentURL, err)
			continue
		}
		conn.Close()
	}
	if len(certs) != len(nodes) {
		t.Errorf("%d certificates for %d agents, want one each", len(certs), len(nodes))
	}
	if _, err := simfleet.New(simfleet.Config{APIURL: api.URL, OwnAddresses: true, Server: &agenttest.Server{}}); err == nil {
		t.Error("OwnAddresses with a Server was accepted")
	}
	if _, err := simfleet.New(simfleet.Config{APIURL: api.URL, OwnAddresses: true,
		HTTPClient: &http.Client{Transport: roundTripper(nil)}}); err == nil {
		t.Error("OwnAddresses with a Transport it cannot clone was accepted")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
