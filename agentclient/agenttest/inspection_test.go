package agenttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/statemachine"
)

const rdMAC2 = "52:54:00:12:34:57"

// inspectAPI is the agent-facing API over TLS with a record of the
// continue_inspection requests it saw.
type inspectAPI struct {
	url     string
	client  *http.Client
	backend *agenttest.Backend

	mu    sync.Mutex
	posts []*http.Request
}

func (a *inspectAPI) seen() []*http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*http.Request(nil), a.posts...)
}

// newInspectAPI serves a real Handler over the test Backend with one node
// in state; before, when set, answers continue_inspection posts in place
// of the handler (return false to let the handler answer).
func newInspectAPI(t *testing.T, state string, before func(n int, w http.ResponseWriter) bool) *inspectAPI {
	t.Helper()
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{UUID: rdNode, ProvisionState: statemachine.State(state)}, rdMAC, rdMAC2); err != nil {
		t.Fatal(err)
	}
	h, err := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	api := &inspectAPI{backend: b}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/continue_inspection") {
			api.mu.Lock()
			api.posts = append(api.posts, r.Clone(context.Background()))
			n := len(api.posts)
			api.mu.Unlock()
			if before != nil && before(n, w) {
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(b.Close)
	api.url, api.client = srv.URL, srv.Client()
	return api
}

// runRamdisk runs rd until the test ends.
func runRamdisk(t *testing.T, rd *agenttest.Ramdisk) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rd.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := rd.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestInspectionRamdiskEndToEnd(t *testing.T) {
	api := newInspectAPI(t, "inspect wait", nil)
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
		APIURL: api.url, HTTPClient: api.client, MACs: []string{rdMAC, rdMAC2}, NodeUUID: strings.ToUpper(rdNode),
		HeartbeatInterval: time.Hour,
		Inspection: &agenttest.InspectionConfig{
			PluginData: map[string]any{"error": "lldp collection failed", "root_disk": map[string]any{"name": "/dev/sda"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runRamdisk(t, rd)
	eventually(t, "first heartbeat", func() bool { return api.backend.HeartbeatCount(rdNode) == 1 })
	// The backend counts the heartbeat before the ramdisk reads the answer.
	eventually(t, "first heartbeat answered", func() bool { return rd.Stats().HeartbeatsAccepted == 1 })

	// The data arrived, for the right node, with the MACs and plugin data.
	all := api.backend.Inspections(rdNode)
	if len(all) != 1 {
		t.Fatalf("%d inspections recorded", len(all))
	}
	d := all[0]
	if d.NodeUUID != rdNode || len(d.Inventory.Interfaces) != 2 || d.Inventory.Interfaces[0].MACAddress != rdMAC ||
		d.Inventory.Interfaces[1].MACAddress != rdMAC2 || d.Inventory.CPU.Count != 8 || d.ReceivedAt.IsZero() {
		t.Fatalf("data %+v", d)
	}
	if d.PluginData["boot_interface"] != rdMAC || d.PluginData["error"] != "lldp collection failed" ||
		d.PluginData["root_disk"].(map[string]any)["name"] != "/dev/sda" || len(d.PluginData) != 3 {
		t.Fatalf("plugin data %v", d.PluginData)
	}
	// IPA's request: 1.84 (the server's maximum) and node_uuid.
	posts := api.seen()
	if len(posts) != 1 || posts[0].Header.Get(agentclient.HeaderAPIVersion) != "1.84" || posts[0].URL.Query().Get("node_uuid") != rdNode {
		t.Fatalf("posts %d, version %q, query %q", len(posts), posts[0].Header.Get(agentclient.HeaderAPIVersion), posts[0].URL.RawQuery)
	}
	// The token came with the 1.84 answer: lookup then saw it masked and
	// the agent kept its own, which the heartbeats carry.
	n, _ := api.backend.Node(rdNode)
	if n.AgentToken == "" || rd.Agent().Token() != n.AgentToken {
		t.Fatal("the agent did not adopt the token from the inspection answer")
	}
	if lr := rd.LookupResponse(); lr == nil || lr.Config.AgentToken != agentclient.MaskedToken {
		t.Fatalf("lookup answer %+v, want a masked token", lr)
	}
	if n.AgentURL != rd.URL() {
		t.Fatalf("heartbeat recorded agent_url %q", n.AgentURL)
	}
	st := rd.Stats()
	if st.InspectionsPosted != 1 || st.InspectionsAccepted != 1 || st.LastInspectionStatus != http.StatusAccepted ||
		st.LastInspectionError != "" || st.Lookups != 1 || st.HeartbeatsAccepted != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The conductor can drive the agent with the token it holds.
	c, _ := agentclient.NewClient(agentclient.ClientConfig{})
	defer c.Close()
	if _, err := c.GetCleanSteps(context.Background(), agentclient.Agent{NodeUUID: rdNode, URL: n.AgentURL, Token: n.AgentToken, VerifyCA: n.AgentVerifyCA}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestInspectionRamdiskCarriesOnAfter404(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  string
		before func(int, http.ResponseWriter) bool
	}{
		// Not waiting for inspection data: Ironic's 404.
		{name: "node not in inspect wait", state: "clean wait"},
		// An API without continue_inspection.
		{name: "endpoint not served", state: "clean wait", before: func(_ int, w http.ResponseWriter) bool {
			http.NotFound(w, nil)
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newInspectAPI(t, tc.state, tc.before)
			rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
				APIURL: api.url, HTTPClient: api.client, MACs: []string{rdMAC}, HeartbeatInterval: time.Hour,
				LookupInterval: time.Millisecond, Inspection: &agenttest.InspectionConfig{},
			})
			if err != nil {
				t.Fatal(err)
			}
			runRamdisk(t, rd)
			eventually(t, "heartbeat after the lookup", func() bool { return api.backend.HeartbeatCount(rdNode) == 1 })
			st := rd.Stats()
			if st.InspectionsPosted != 1 || st.InspectionsAccepted != 0 || st.LastInspectionStatus != http.StatusNotFound || st.LastInspectionError == "" {
				t.Fatalf("stats %+v", st)
			}
			if api.backend.InspectionCount(rdNode) != 0 {
				t.Fatal("data recorded")
			}
			// The token came from the lookup this time.
			if n, _ := api.backend.Node(rdNode); n.AgentToken == "" || rd.Agent().Token() != n.AgentToken {
				t.Fatal("token not adopted at lookup")
			}
		})
	}
}

// fastClock fires waits up to a minute at once and never fires longer
// ones, recording every wait.
type fastClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *fastClock) Now() time.Time { return time.Now() }

func (c *fastClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	if d <= time.Minute {
		ch <- time.Now()
	}
	return ch
}

func (c *fastClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// steppingClock's time moves only when the ramdisk waits: After(d)
// advances it by d and fires at once. A timeout on it counts the
// ramdisk's own waits, whatever the machine's speed.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppingClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func TestInspectionRamdiskRetries(t *testing.T) {
	t.Run("409 then success", func(t *testing.T) {
		api := newInspectAPI(t, "inspect wait", nil)
		// Locked: the handler cannot create the token and answers 409.
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.Reservation = "conductor-2" })
		clock := &fastClock{}
		rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
			APIURL: api.url, HTTPClient: api.client, MACs: []string{rdMAC}, Clock: clock, HeartbeatInterval: time.Hour,
			Inspection: &agenttest.InspectionConfig{},
		})
		if err != nil {
			t.Fatal(err)
		}
		runRamdisk(t, rd)
		eventually(t, "three refused posts", func() bool { return rd.Stats().InspectionsPosted >= 3 })
		if st := rd.Stats(); st.InspectionsAccepted != 0 || !strings.Contains(st.LastInspectionError, "locked") {
			t.Fatalf("stats %+v", st)
		}
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.Reservation = "" })
		eventually(t, "heartbeat", func() bool { return api.backend.HeartbeatCount(rdNode) == 1 })
		st := rd.Stats()
		if st.InspectionsAccepted != 1 || st.LastInspectionStatus != http.StatusAccepted || api.backend.InspectionCount(rdNode) != 1 {
			t.Fatalf("stats %+v, %d recorded", st, api.backend.InspectionCount(rdNode))
		}
		if n, _ := api.backend.Node(rdNode); rd.Agent().Token() != n.AgentToken || n.AgentToken == "" {
			t.Fatal("token not adopted after the retry")
		}
		// IPA's pauses after 409: 5, 10, then 30 s, on the injected clock.
		w := clock.recorded()
		if len(w) < 3 || w[0] != 5*time.Second || w[1] != 10*time.Second || w[2] != 30*time.Second {
			t.Fatalf("waits %v", w)
		}
	})
	t.Run("5xx and a callback URL of its own", func(t *testing.T) {
		api := newInspectAPI(t, "inspect wait", func(n int, w http.ResponseWriter) bool {
			if n <= 2 {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return true
			}
			return false
		})
		clock := &fastClock{}
		rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
			APIURL: api.url + "/elsewhere", HTTPClient: api.client, MACs: []string{rdMAC}, Clock: clock, Seed: 3,
			LookupInterval: 2 * time.Second, LookupMaxInterval: 3 * time.Second, LookupTimeout: time.Hour,
			Inspection: &agenttest.InspectionConfig{CallbackURL: api.url + "/v1/continue_inspection"},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Inspect alone: the lookup would go to the wrong place.
		if err := rd.Inspect(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		st := rd.Stats()
		if st.InspectionsPosted != 3 || st.InspectionsAccepted != 1 || api.backend.InspectionCount(rdNode) != 1 {
			t.Fatalf("stats %+v", st)
		}
		// Discovery failed (APIURL is wrong): the post says 1.84.
		if v := api.seen()[2].Header.Get(agentclient.HeaderAPIVersion); v != "1.84" {
			t.Fatalf("version %q", v)
		}
		// Random exponential back-off from LookupInterval, capped.
		w := clock.recorded()
		if len(w) != 2 || w[0] < time.Second || w[0] > 2*time.Second || w[1] < 1500*time.Millisecond || w[1] > 3*time.Second {
			t.Fatalf("waits %v", w)
		}
	})
	t.Run("gives up after the lookup timeout", func(t *testing.T) {
		api := newInspectAPI(t, "inspect wait", nil)
		api.backend.Update(rdNode, func(n *agentclient.Node) { n.Reservation = "conductor-2" })
		// The timeout is on the ramdisk's clock, which moves only by its
		// waits: posts at 0, 20, ... 100 ms, then the next wait would end
		// past the timeout. (On the real clock a loaded machine could
		// spend the whole timeout in the first post.)
		rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
			APIURL: api.url, HTTPClient: api.client, MACs: []string{rdMAC}, LookupTimeout: 100 * time.Millisecond,
			LookupConflictBackoff: []time.Duration{20 * time.Millisecond}, Inspection: &agenttest.InspectionConfig{},
			Clock: &steppingClock{now: time.Unix(1e9, 0)},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		err = rd.Inspect(context.Background())
		if !errors.Is(err, agenttest.ErrInspectionTimeout) {
			t.Fatalf("%v", err)
		}
		if st := rd.Stats(); st.InspectionsPosted != 6 || st.InspectionsAccepted != 0 || st.LastInspectionStatus != http.StatusConflict {
			t.Fatalf("stats %+v, want 6 refused posts", st)
		}
	})
	t.Run("4xx is final", func(t *testing.T) {
		api := newInspectAPI(t, "inspect wait", nil)
		bad := agentclient.Inventory{} // no interfaces: 400
		rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{
			APIURL: api.url, HTTPClient: api.client, MACs: []string{rdMAC}, Inspection: &agenttest.InspectionConfig{Inventory: &bad},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		err = rd.Inspect(context.Background())
		if !errors.Is(err, agenttest.ErrInspectionRefused) || !strings.Contains(err.Error(), "inventory.interfaces") {
			t.Fatalf("%v", err)
		}
		if st := rd.Stats(); st.InspectionsPosted != 1 || st.LastInspectionStatus != http.StatusBadRequest {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestDefaultInventory(t *testing.T) {
	inv := agenttest.DefaultInventory([]string{"52-54-00-12-34-56", rdMAC2})
	if len(inv.Interfaces) != 2 || inv.Interfaces[0].MACAddress != rdMAC || inv.Interfaces[0].IPv4Address == "" || !inv.Interfaces[0].HasCarrier ||
		inv.Interfaces[1].MACAddress != rdMAC2 || inv.Interfaces[1].IPv4Address != "" {
		t.Fatalf("interfaces %+v", inv.Interfaces)
	}
	if inv.CPU.Count != 8 || inv.CPU.Architecture != "x86_64" || inv.Memory.Total != 16<<30 || inv.Memory.PhysicalMB != 16384 {
		t.Fatalf("cpu %+v memory %+v", inv.CPU, inv.Memory)
	}
	if len(inv.Disks) != 2 || inv.Disks[0].Name != "/dev/sda" || inv.Disks[0].Rotational || inv.Disks[0].Size < 480e9 || inv.Disks[0].Size >= 481e9 ||
		inv.Disks[1].Name != "/dev/sdb" || !inv.Disks[1].Rotational || inv.Disks[1].Size < 2e12 || inv.Disks[1].Size >= 2.01e12 {
		t.Fatalf("disks %+v", inv.Disks)
	}
	if inv.SystemVendor == nil || inv.SystemVendor.Manufacturer == "" || inv.Boot == nil || inv.Boot.CurrentBootMode != "uefi" || inv.BMCAddress == "" {
		t.Fatalf("inventory %+v", inv)
	}
	if other := agenttest.DefaultInventory([]string{rdMAC2}); other.BMCAddress == inv.BMCAddress || other.SystemVendor.SerialNumber == inv.SystemVendor.SerialNumber {
		t.Fatal("two machines share a BMC address or serial number")
	}
	// The handler accepts it.
	body, _ := json.Marshal(map[string]any{"inventory": inv})
	req, err := agentclient.DecodeInspectionRequest(body)
	if err != nil || req.InventoryTypeError != "" || len(req.Addresses) != 2 || len(req.BMCAddresses) != 1 {
		t.Fatalf("%+v %v", req, err)
	}
}

func TestNewRamdiskInspectionValidation(t *testing.T) {
	for name, cfg := range map[string]agenttest.RamdiskConfig{
		"relative callback URL":   {APIURL: "http://x", MACs: []string{rdMAC}, Inspection: &agenttest.InspectionConfig{CallbackURL: "/v1/continue_inspection"}},
		"no MACs for the default": {APIURL: "http://x", NodeUUID: rdNode, Inspection: &agenttest.InspectionConfig{}},
		"inventory in plugin data": {APIURL: "http://x", MACs: []string{rdMAC},
			Inspection: &agenttest.InspectionConfig{PluginData: map[string]any{"inventory": 1}}},
		"unencodable plugin data": {APIURL: "http://x", MACs: []string{rdMAC},
			Inspection: &agenttest.InspectionConfig{PluginData: map[string]any{"f": func() {}}}},
	} {
		if rd, err := agenttest.NewRamdisk(cfg); err == nil {
			_ = rd.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: "http://x", MACs: []string{rdMAC}})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if err := rd.Inspect(context.Background()); err == nil {
		t.Fatal("Inspect without an Inspection configuration")
	}
}
