package agentclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/testlog"
	"github.com/anvilmetal/anvil/statemachine"
)

const (
	inspectPath = "/v1/continue_inspection"
	bmcAddr     = "10.1.2.3"
	// inventoryDoc is a small inventory as IPA sends it, with fields the
	// typed Inventory does not know.
	inventoryDoc = `{"interfaces":[{"name":"eth0","mac_address":"52:54:00:AA:BB:01","ipv4_address":"192.0.2.10","has_carrier":true,"lldp":[[1,"04aabbcc"]],"client_id":null}],` +
		`"cpu":{"model_name":"Xeon","count":8,"architecture":"x86_64","flags":["vmx"]},"memory":{"total":17179869184,"physical_mb":16384},` +
		`"disks":[{"name":"/dev/sda","size":480103981056,"rotational":false}],"bmc_address":"` + bmcAddr + `","bmc_v6address":"","system_vendor":{"manufacturer":"Dell Inc.","firmware":{"version":"2.1"}},` +
		`"boot":{"current_boot_mode":"uefi","pxe_interface":"52:54:00:aa:bb:01"},"hostname":"localhost"}`
)

// inspectBody is a valid body: the inventory above and plugin data.
func inspectBody(extra string) string {
	b := `{"inventory":` + inventoryDoc
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// bodyWithInterfaces is a body whose inventory has only the given
// interfaces JSON (and no BMC address).
func bodyWithInterfaces(ifaces string) string {
	return `{"inventory":{"interfaces":` + ifaces + `}}`
}

// queryRecorder wraps the test backend and records inspection lookups.
type queryRecorder struct {
	*agenttest.Backend
	mu      sync.Mutex
	queries []agentclient.InspectionLookup
}

func (q *queryRecorder) LookupInspectedNode(ctx context.Context, l agentclient.InspectionLookup) (agentclient.Node, error) {
	q.mu.Lock()
	q.queries = append(q.queries, l)
	q.mu.Unlock()
	return q.Backend.LookupInspectedNode(ctx, l)
}

func (q *queryRecorder) last() agentclient.InspectionLookup {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queries) == 0 {
		return agentclient.InspectionLookup{}
	}
	return q.queries[len(q.queries)-1]
}

var inspectedAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))

// newInspectEnv serves a handler for a node in state over the recording
// backend; the handler's clock is fixed at inspectedAt.
func newInspectEnv(t *testing.T, cfg agentclient.HandlerConfig, state string) (*handlerEnv, *queryRecorder) {
	t.Helper()
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{
		UUID: nodeID, Name: "node-0", ProvisionState: statemachine.State(state),
		Properties:         map[string]any{"cpus": 8},
		DriverInternalInfo: map[string]any{"deploy_boot_mode": "uefi"},
	}, nodeMAC); err != nil {
		t.Fatal(err)
	}
	b.SetBMCAddresses(nodeID, bmcAddr)
	rec := &queryRecorder{Backend: b}
	logs := &testlog.Buffer{}
	cfg.Logger = slogDebug(logs)
	if cfg.Clock == nil {
		cfg.Clock = fixedClock{inspectedAt}
	}
	h, err := agentclient.NewHandler(rec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(b.Close)
	return &handlerEnv{t: t, url: srv.URL, backend: b, logs: logs}, rec
}

func slogDebug(w *testlog.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func faultOf(body []byte) string {
	if e, ok := agentclient.ParseIronicError(body); ok {
		return e.Faultstring
	}
	return string(body)
}

func TestContinueInspection(t *testing.T) {
	type result struct {
		env    *handlerEnv
		rec    *queryRecorder
		status int
		body   []byte
	}
	for _, tc := range []struct {
		name    string
		cfg     agentclient.HandlerConfig
		state   string // default "inspect wait"
		setup   func(b *agenttest.Backend)
		path    string // default inspectPath
		version string
		body    string
		want    int
		fault   string // substring of the fault string
		check   func(t *testing.T, r result)
	}{
		{name: "endpoints disabled", cfg: agentclient.HandlerConfig{DisableRamdiskEndpoints: true}, version: "1.84", body: inspectBody(""),
			want: 403, fault: "Ramdisk endpoints are disabled"},
		{name: "version too old", version: "1.82", body: inspectBody(""), want: 404, fault: "API version 1.83 or newer is required"},
		{name: "ramdisk-era version too old", version: "1.22", body: inspectBody(""), want: 404, fault: "1.83"},
		{name: "version newer than served", version: "1.85", body: inspectBody(""), want: 406},
		{name: "node_uuid before 1.84", path: inspectPath + "?node_uuid=" + nodeID, version: "1.83", body: inspectBody(""),
			want: 404, fault: "node_uuid parameter requires API version 1.84"},
		{name: "node_uuid at 1.1", path: inspectPath + "?node_uuid=" + nodeID, body: inspectBody(""), want: 404, fault: "1.84"},
		{name: "bad node_uuid", path: inspectPath + "?node_uuid=node-0", version: "1.84", body: inspectBody(""),
			want: 400, fault: `Expected a UUID for node_uuid but received "node-0"`},
		{name: "body not JSON", version: "1.84", body: `{"inventory":`, want: 400, fault: "body: expected a JSON object, got malformed JSON"},
		{name: "body an array", version: "1.84", body: `[]`, want: 400, fault: "body: expected a JSON object, got an array"},
		{name: "body null", version: "1.84", body: `null`, want: 400, fault: "body: expected a JSON object, got null"},
		{name: "missing inventory", version: "1.84", body: `{"boot_interface":"` + nodeMAC + `"}`, want: 400,
			fault: "inventory is required: expected an object"},
		{name: "inventory not an object", version: "1.84", body: `{"inventory":"x"}`, want: 400, fault: "inventory: expected an object, got a string"},
		{name: "missing interfaces", version: "1.84", body: `{"inventory":{"bmc_address":"` + bmcAddr + `"}}`, want: 400,
			fault: "inventory.interfaces is required: expected an array of at least one interface object"},
		{name: "interfaces not an array", version: "1.84", body: bodyWithInterfaces(`{}`), want: 400, fault: "inventory.interfaces: expected an array of at least one interface object, got an object"},
		{name: "empty interfaces", version: "1.84", body: bodyWithInterfaces(`[]`), want: 400, fault: "inventory.interfaces: expected an array of at least one interface object, got an empty array"},
		{name: "interface not an object", version: "1.84", body: bodyWithInterfaces(`["` + nodeMAC + `"]`), want: 400, fault: "inventory.interfaces[0]: expected an object, got a string"},
		{name: "missing mac", version: "1.84", body: bodyWithInterfaces(`[{"mac_address":"` + nodeMAC + `"},{"name":"eth1"}]`), want: 400,
			fault: "inventory.interfaces[1].mac_address is required: expected a string"},
		{name: "bad mac type", version: "1.84", body: bodyWithInterfaces(`[{"mac_address":525400}]`), want: 400,
			fault: "inventory.interfaces[0].mac_address: expected a string, got a number"},
		{name: "bad bmc_address type", version: "1.84", body: `{"inventory":{"interfaces":[{"mac_address":"` + nodeMAC + `"}],"bmc_address":null}}`, want: 400,
			fault: "inventory.bmc_address: expected a string, got null"},
		{name: "no lookup information", version: "1.84", body: `{"inventory":{"interfaces":[{"mac_address":"zz:zz"},{"mac_address":""}],"bmc_address":""}}`, want: 400,
			fault: "No lookup information provided"},
		{name: "body too large", version: "1.84", body: inspectBody(`"pad":"` + strings.Repeat("x", agentclient.MaxInspectionBodyBytes) + `"`), want: 413,
			fault: "larger than the 4194304 bytes allowed"},
		{name: "body larger than a configured bound", cfg: agentclient.HandlerConfig{MaxInspectionBodyBytes: 1000}, version: "1.84",
			body: inspectBody(`"logs":"` + strings.Repeat("x", 1000) + `"`), want: 413, fault: "larger than the 1000 bytes allowed"},
		{name: "body within a raised bound", cfg: agentclient.HandlerConfig{MaxInspectionBodyBytes: 8 << 20}, version: "1.84",
			body: inspectBody(`"logs":"` + strings.Repeat("x", agentclient.MaxInspectionBodyBytes) + `"`), want: 202},
		{name: "not found", version: "1.84", body: bodyWithInterfaces(`[{"mac_address":"52:54:00:00:00:99"}]`), want: 404,
			fault: "Node could not be found or is not waiting for inspection data"},
		{name: "not found by node_uuid", path: inspectPath + "?node_uuid=00000000-0000-0000-0000-000000000000", version: "1.84", body: inspectBody(""), want: 404},
		{name: "not waiting for inspection", state: "clean wait", version: "1.84", body: inspectBody(""), want: 404,
			fault: "Node could not be found or is not waiting for inspection data",
			check: func(t *testing.T, r result) {
				if n, _ := r.env.backend.Node(nodeID); n.AgentToken != "" {
					t.Fatal("a refused inspection created a token")
				}
			}},
		{name: "locked while creating the token", setup: func(b *agenttest.Backend) {
			b.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "conductor-2" })
		}, version: "1.84", body: inspectBody(""), want: 409, fault: "is locked",
			check: func(t *testing.T, r result) {
				if n, _ := r.env.backend.Node(nodeID); n.AgentToken != "" || r.env.backend.InspectionCount(nodeID) != 0 {
					t.Fatal("a 409 left a token or inspection data behind")
				}
			}},
		{name: "locked while handing the data over", setup: func(b *agenttest.Backend) {
			b.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "conductor-2"; n.AgentToken = fuzzToken })
		}, version: "1.83", body: inspectBody(""), want: 409, fault: "is locked",
			check: func(t *testing.T, r result) {
				if r.env.backend.InspectionCount(nodeID) != 0 {
					t.Fatal("data recorded despite 409")
				}
			}},
		{name: "old-style answer at 1.83", version: "1.83", body: inspectBody(""), want: 202,
			check: func(t *testing.T, r result) {
				var got map[string]any
				if err := json.Unmarshal(r.body, &got); err != nil || len(got) != 1 || got["uuid"] != nodeID {
					t.Fatalf("answer %s (%v), want {\"uuid\": %q}", r.body, err, nodeID)
				}
				if n, _ := r.env.backend.Node(nodeID); n.AgentToken != "" {
					t.Fatal("a 1.83 inspection created a token")
				}
			}},
		{name: "inspector-era agent without a version header", version: "", body: inspectBody(""), want: 202,
			check: func(t *testing.T, r result) {
				if !strings.Contains(string(r.body), `"uuid":"`+nodeID+`"`) {
					t.Fatalf("answer %s", r.body)
				}
			}},
		{name: "new-style answer with a fresh token", path: inspectPath + "/", version: "1.84", body: inspectBody(""), want: 202,
			check: func(t *testing.T, r result) {
				var lr agentclient.LookupResponse
				if err := json.Unmarshal(r.body, &lr); err != nil {
					t.Fatal(err)
				}
				n, _ := r.env.backend.Node(nodeID)
				if !tokenRE.MatchString(lr.Config.AgentToken) || lr.Config.AgentToken != n.AgentToken {
					t.Fatalf("token %q, stored %q", lr.Config.AgentToken, n.AgentToken)
				}
				if lr.Node.UUID != nodeID || lr.Node.DriverInternalInfo[driver.InternalAgentToken] != agentclient.MaskedToken ||
					lr.Config.HeartbeatTimeout != 300 || !lr.Config.AgentTokenRequired || len(lr.Node.Links) != 2 {
					t.Fatalf("answer %s", r.body)
				}
				if strings.Contains(r.env.logs.String(), n.AgentToken) {
					t.Fatal("token logged")
				}
			}},
		{name: "new-style answer with the masked token", setup: func(b *agenttest.Backend) {
			b.Update(nodeID, func(n *agentclient.Node) { n.AgentToken = fuzzToken })
		}, version: "latest", body: inspectBody(""), want: 202,
			check: func(t *testing.T, r result) {
				var lr agentclient.LookupResponse
				if err := json.Unmarshal(r.body, &lr); err != nil {
					t.Fatal(err)
				}
				if lr.Config.AgentToken != agentclient.MaskedToken || strings.Contains(string(r.body), fuzzToken) {
					t.Fatalf("answer %s", r.body)
				}
			}},
		{name: "data and plugin data passed through", version: "1.84",
			body: inspectBody(`"boot_interface":"01-52-54-00-aa-bb-01","root_disk":{"name":"/dev/sda","size":480103981056},"error":null,"logs":"H4sI"`), want: 202,
			check: func(t *testing.T, r result) {
				d, ok := r.env.backend.LastInspection(nodeID)
				if !ok {
					t.Fatal("nothing recorded")
				}
				if d.NodeUUID != nodeID || !d.ReceivedAt.Equal(inspectedAt) || d.ReceivedAt.Location() != time.UTC {
					t.Fatalf("node %s received %v", d.NodeUUID, d.ReceivedAt)
				}
				if string(d.RawInventory) != inventoryDoc {
					t.Fatalf("raw inventory changed:\n%s", d.RawInventory)
				}
				inv := d.Inventory
				if len(inv.Interfaces) != 1 || inv.Interfaces[0].MACAddress != "52:54:00:AA:BB:01" || !inv.Interfaces[0].HasCarrier ||
					len(inv.Interfaces[0].LLDP) != 1 || inv.CPU.Count != 8 || inv.Memory.PhysicalMB != 16384 ||
					len(inv.Disks) != 1 || inv.Disks[0].Size != 480103981056 || inv.BMCAddress != bmcAddr ||
					inv.SystemVendor == nil || inv.SystemVendor.Manufacturer != "Dell Inc." || inv.Boot == nil || inv.Boot.CurrentBootMode != "uefi" {
					t.Fatalf("inventory %+v", inv)
				}
				pd := d.PluginData
				root, _ := pd["root_disk"].(map[string]any)
				if len(pd) != 4 || pd["boot_interface"] != "01-52-54-00-aa-bb-01" || root["name"] != "/dev/sda" || pd["logs"] != "H4sI" {
					t.Fatalf("plugin data %v", pd)
				}
				if v, ok := pd["error"]; !ok || v != nil {
					t.Fatalf("error key %v %v", v, ok)
				}
				if _, ok := pd["inventory"]; ok {
					t.Fatal("inventory in plugin data")
				}
				if q := r.rec.last(); q.NodeUUID != "" || len(q.Addresses) != 1 || q.Addresses[0] != nodeMAC || len(q.BMCAddresses) != 1 || q.BMCAddresses[0] != bmcAddr {
					t.Fatalf("lookup %+v", q)
				}
			}},
		{name: "invalid MACs dropped, duplicates merged", version: "1.84",
			body: bodyWithInterfaces(`[{"mac_address":"zz:zz:zz:zz:zz:zz"},{"mac_address":"52-54-00-AA-BB-01"},{"mac_address":"52:54:00:aa:bb:01"},{"mac_address":"52:54:00:00:00:02"}]`), want: 202,
			check: func(t *testing.T, r result) {
				q := r.rec.last()
				if len(q.Addresses) != 2 || q.Addresses[0] != nodeMAC || q.Addresses[1] != "52:54:00:00:00:02" || len(q.BMCAddresses) != 0 {
					t.Fatalf("lookup %+v", q)
				}
				if !strings.Contains(r.env.logs.String(), "dropping invalid MAC addresses") {
					t.Fatal("dropped MAC not logged")
				}
				if d, _ := r.env.backend.LastInspection(nodeID); d.PluginData == nil || len(d.PluginData) != 0 {
					t.Fatalf("plugin data %#v, want empty", d.PluginData)
				}
			}},
		{name: "found by BMC address alone", version: "1.84",
			body: `{"inventory":{"interfaces":[{"mac_address":"not-a-mac"}],"bmc_address":"` + bmcAddr + `"}}`, want: 202,
			check: func(t *testing.T, r result) {
				if r.env.backend.InspectionCount(nodeID) != 1 {
					t.Fatal("not recorded")
				}
			}},
		{name: "found by node_uuid alone", path: inspectPath + "?node_uuid=" + strings.ToUpper(nodeID), version: "1.84",
			body: bodyWithInterfaces(`[{"mac_address":"bogus"}]`), want: 202,
			check: func(t *testing.T, r result) {
				if q := r.rec.last(); q.NodeUUID != nodeID {
					t.Fatalf("lookup %+v", q)
				}
			}},
		{name: "fields of an unexpected type outside the schema are tolerated", version: "1.84",
			body: `{"inventory":{"interfaces":[{"mac_address":"` + nodeMAC + `","speed_mbps":"fast"}],"cpu":{"count":"eight","architecture":"x86_64"}}}`, want: 202,
			check: func(t *testing.T, r result) {
				d, _ := r.env.backend.LastInspection(nodeID)
				if d.Inventory.CPU.Architecture != "x86_64" || d.Inventory.CPU.Count != 0 || !strings.Contains(string(d.RawInventory), `"eight"`) {
					t.Fatalf("inventory %+v", d.Inventory)
				}
				if !strings.Contains(r.env.logs.String(), "unexpected type") {
					t.Fatal("type mismatch not logged")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := tc.state
			if state == "" {
				state = "inspect wait"
			}
			env, rec := newInspectEnv(t, tc.cfg, state)
			if tc.setup != nil {
				tc.setup(env.backend)
			}
			path := tc.path
			if path == "" {
				path = inspectPath
			}
			st, body, hdr := env.do(http.MethodPost, path, tc.version, tc.body)
			if st != tc.want {
				t.Fatalf("HTTP %d, want %d: %s", st, tc.want, body)
			}
			if st >= 400 {
				e, ok := agentclient.ParseIronicError(body)
				if !ok || !strings.Contains(e.Faultstring, tc.fault) || e.Faultcode != "Client" {
					t.Fatalf("fault %q (ok %v), want it to contain %q", faultOf(body), ok, tc.fault)
				}
				if st != 409 && env.backend.InspectionCount(nodeID) != 0 {
					t.Fatal("refused data was recorded")
				}
			} else {
				if env.backend.InspectionCount(nodeID) != 1 {
					t.Fatalf("%d inspections recorded, want 1", env.backend.InspectionCount(nodeID))
				}
				if hdr.Get("Content-Type") != "application/json" {
					t.Fatalf("content type %q", hdr.Get("Content-Type"))
				}
			}
			if tc.check != nil {
				tc.check(t, result{env: env, rec: rec, status: st, body: body})
			}
		})
	}
}

func TestContinueInspectionWithoutCapability(t *testing.T) {
	mem := agenttest.NewBackend()
	if err := mem.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "inspect wait"}, nodeMAC); err != nil {
		t.Fatal(err)
	}
	// Only the Backend methods: the capability is hidden.
	h, err := agentclient.NewHandler(struct{ agentclient.Backend }{mem}, agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	e := &handlerEnv{t: t, url: srv.URL, backend: mem}
	st, body, _ := e.do(http.MethodPost, inspectPath, "1.84", inspectBody(""))
	_, unknown, _ := e.do(http.MethodPost, "/v1/no_such_endpoint", "1.84", inspectBody(""))
	wantStatus(t, st, http.StatusNotFound, body)
	if !bytes.Equal(body, unknown) {
		t.Fatalf("answer differs from an unknown path's:\n%s\n%s", body, unknown)
	}
	if mem.InspectionCount(nodeID) != 0 {
		t.Fatal("data recorded")
	}
	// The other endpoints still work.
	if st, body := e.lookup("addresses="+nodeMAC, "1.62"); st != http.StatusOK {
		t.Fatalf("lookup HTTP %d: %s", st, body)
	}
}

// failingInspection fails one InspectionBackend method with err.
type failingInspection struct {
	*agenttest.Backend
	lookupErr, continueErr error
}

func (f failingInspection) LookupInspectedNode(ctx context.Context, q agentclient.InspectionLookup) (agentclient.Node, error) {
	if f.lookupErr != nil {
		return agentclient.Node{}, f.lookupErr
	}
	return f.Backend.LookupInspectedNode(ctx, q)
}

func (f failingInspection) ContinueInspection(ctx context.Context, d agentclient.InspectionData) error {
	if f.continueErr != nil {
		return f.continueErr
	}
	return f.Backend.ContinueInspection(ctx, d)
}

func TestContinueInspectionBackendErrors(t *testing.T) {
	fire := errors.New("database on fire")
	for _, tc := range []struct {
		name                   string
		lookupErr, continueErr error
		want                   int
	}{
		{"lookup fails", fire, nil, 500},
		{"lookup finds the node locked", agentclient.ErrNodeLocked, nil, 409},
		{"hand-over finds no node", nil, agentclient.ErrNodeNotFound, 404},
		{"hand-over fails", nil, fire, 500},
		{"hand-over cancelled", nil, context.Canceled, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := agenttest.NewBackend()
			_ = mem.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "inspect wait"}, nodeMAC)
			logs := &testlog.Buffer{}
			h, _ := agentclient.NewHandler(failingInspection{mem, tc.lookupErr, tc.continueErr}, agentclient.HandlerConfig{Logger: slogDebug(logs)})
			srv := httptest.NewServer(h)
			defer srv.Close()
			e := &handlerEnv{t: t, url: srv.URL, backend: mem}
			st, body, _ := e.do(http.MethodPost, inspectPath, "1.84", inspectBody(""))
			if st != tc.want {
				t.Fatalf("HTTP %d, want %d: %s", st, tc.want, body)
			}
			if strings.Contains(string(body), "fire") {
				t.Fatalf("internal error leaked to the agent: %s", body)
			}
			if tc.want == 500 && !strings.Contains(logs.String(), "database on fire") {
				t.Fatal("backend failure not logged")
			}
			n, _ := mem.Node(nodeID)
			if n.AgentToken != "" && strings.Contains(logs.String(), n.AgentToken) {
				t.Fatal("token logged")
			}
		})
	}
}

func TestContinueInspectionVersionHeaders(t *testing.T) {
	e, _ := newInspectEnv(t, agentclient.HandlerConfig{}, "inspect wait")
	_, _, hdr := e.do(http.MethodPost, inspectPath, "1.84", inspectBody(""))
	if hdr.Get(agentclient.HeaderAPIMaxVersion) != "1.84" || hdr.Get(agentclient.HeaderAPIVersion) != "1.84" {
		t.Fatalf("headers %v", hdr)
	}
	// Lookup accepts the new maximum too.
	if st, body := e.lookup("addresses="+nodeMAC, "1.84"); st != http.StatusOK {
		t.Fatalf("lookup at 1.84: HTTP %d %s", st, body)
	}
}

func TestDecodeInspectionRequestErrorsAreTyped(t *testing.T) {
	_, err := agentclient.DecodeInspectionRequest([]byte(bodyWithInterfaces(`[{"mac_address":1}]`)))
	de, ok := errors.AsType[*agentclient.InspectionDataError](err)
	if !ok || !errors.Is(err, agentclient.ErrInvalidArgument) || de.Field != "inventory.interfaces[0].mac_address" || de.Expected != "a string" || de.Got != "a number" {
		t.Fatalf("%#v", err)
	}
	if got := err.Error(); got != "agentclient: inspection data: inventory.interfaces[0].mac_address: expected a string, got a number" {
		t.Fatalf("message %q", got)
	}
}
