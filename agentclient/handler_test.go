package agentclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/testlog"
	"github.com/anvilmetal/anvil/statemachine"
)

const (
	nodeID   = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	nodeMAC  = "52:54:00:aa:bb:01"
	agentURL = "https://10.0.0.5:9999"
)

type handlerEnv struct {
	t       *testing.T
	url     string
	backend *agenttest.Backend
	logs    *testlog.Buffer
}

func newHandlerEnv(t *testing.T, cfg agentclient.HandlerConfig, state string) *handlerEnv {
	t.Helper()
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{
		UUID: nodeID, Name: "node-0", ProvisionState: statemachine.State(state),
		Properties:   map[string]any{"cpus": 8},
		InstanceInfo: map[string]any{"image_source": "http://img", "configdrive": "H4sIAAAA", "image_url": "http://secret", "admin_password": "pw"},
		DriverInternalInfo: map[string]any{
			"clean_steps": []any{}, "deploy_boot_mode": "uefi",
		},
	}, nodeMAC); err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := agentclient.NewHandler(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(b.Close)
	return &handlerEnv{t: t, url: srv.URL, backend: b, logs: logs}
}

func (e *handlerEnv) do(method, path, version, body string) (int, []byte, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if version != "" {
		req.Header.Set(agentclient.HeaderAPIVersion, version)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header
}

func (e *handlerEnv) lookup(query, version string) (int, []byte) {
	e.t.Helper()
	st, b, _ := e.do(http.MethodGet, "/v1/lookup?"+query, version, "")
	return st, b
}

func (e *handlerEnv) heartbeat(ident, version string, body map[string]any) (int, string) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	st, data, _ := e.do(http.MethodPost, "/v1/heartbeat/"+ident, version, string(b))
	msg := string(data)
	if ie, ok := agentclient.ParseIronicError(data); ok {
		msg = ie.Faultstring
	}
	return st, msg
}

// token looks the node up once and returns the disclosed token.
func (e *handlerEnv) token() string {
	e.t.Helper()
	st, body := e.lookup("addresses="+nodeMAC, "1.62")
	if st != http.StatusOK {
		e.t.Fatalf("lookup: HTTP %d %s", st, body)
	}
	var lr agentclient.LookupResponse
	if err := json.Unmarshal(body, &lr); err != nil {
		e.t.Fatal(err)
	}
	return lr.Config.AgentToken
}

func wantStatus(t *testing.T, got, want int, body any) {
	t.Helper()
	if got != want {
		t.Fatalf("HTTP %d, want %d: %s", got, want, body)
	}
}

func TestLookupEndpointsDisabled(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{DisableRamdiskEndpoints: true}, "clean wait")
	st, body := e.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusForbidden, body)
	code, msg := e.heartbeat(nodeID, "1.68", map[string]any{"callback_url": agentURL})
	wantStatus(t, code, http.StatusForbidden, msg)
}

func TestLookupAPIVersion(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	for _, tc := range []struct {
		version string
		want    int
	}{
		{"", http.StatusNotFound},          // no header: minimum version 1.1
		{"1.21", http.StatusNotFound},      // before the ramdisk endpoints
		{"1.22", http.StatusOK},            // first version with lookup
		{"latest", http.StatusOK},          // maximum
		{"1.99", http.StatusNotAcceptable}, // newer than served
		{"one.two", http.StatusNotAcceptable},
	} {
		st, body, hdr := e.do(http.MethodGet, "/v1/lookup?addresses="+nodeMAC, tc.version, "")
		if st != tc.want {
			t.Errorf("version %q: HTTP %d, want %d: %s", tc.version, st, tc.want, body)
		}
		if hdr.Get(agentclient.HeaderAPIMaxVersion) != "1.84" || hdr.Get(agentclient.HeaderAPIMinVersion) != "1.1" {
			t.Errorf("version %q: min/max headers %q/%q", tc.version, hdr.Get(agentclient.HeaderAPIMinVersion), hdr.Get(agentclient.HeaderAPIMaxVersion))
		}
		if st == http.StatusOK && tc.version == "latest" && hdr.Get(agentclient.HeaderAPIVersion) != "1.84" {
			t.Errorf("latest negotiated %q", hdr.Get(agentclient.HeaderAPIVersion))
		}
	}
}

func TestVersionDiscovery(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	st, body, _ := e.do(http.MethodGet, "/", "", "")
	wantStatus(t, st, http.StatusOK, body)
	var doc struct {
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.DefaultVersion.Version != "1.84" {
		t.Fatalf("default_version.version = %q: %s", doc.DefaultVersion.Version, body)
	}
	st, body, _ = e.do(http.MethodGet, "/v1/nodes", "1.62", "")
	wantStatus(t, st, http.StatusNotFound, body)
}

func TestLookupQueryValidation(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", http.StatusBadRequest},                                             // nothing to look up by
		{"addresses=zz:zz", http.StatusBadRequest},                              // the only MAC is invalid and dropped
		{"addresses=,,", http.StatusBadRequest},                                 // empty list
		{"node_uuid=not-a-uuid", http.StatusBadRequest},                         // malformed UUID
		{"addresses=zz:zz," + nodeMAC, http.StatusOK},                           // invalid MAC dropped, valid one used
		{"addresses=52-54-00-AA-BB-01", http.StatusOK},                          // hyphens and upper case normalised
		{"node_uuid=" + strings.ToUpper(nodeID), http.StatusOK},                 // by UUID
		{"addresses=52:54:00:00:00:99&node_uuid=" + nodeID, http.StatusOK},      // UUID wins over MACs
		{"addresses=52:54:00:00:00:99", http.StatusNotFound},                    // no such port
		{"node_uuid=00000000-0000-0000-0000-000000000000", http.StatusNotFound}, // no such node
	} {
		st, body := e.lookup(tc.query, "1.62")
		if st != tc.want {
			t.Errorf("query %q: HTTP %d, want %d: %s", tc.query, st, tc.want, body)
		}
	}
	if !strings.Contains(e.logs.String(), "dropping invalid MAC addresses") {
		t.Error("invalid MAC was not logged as dropped")
	}
}

func TestLookupStateRestriction(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "available")
	stState, bodyState := e.lookup("addresses="+nodeMAC, "1.62")
	stMissing, bodyMissing := e.lookup("addresses=52:54:00:00:00:99", "1.62")
	wantStatus(t, stState, http.StatusNotFound, bodyState)
	wantStatus(t, stMissing, http.StatusNotFound, bodyMissing)
	if !bytes.Equal(bodyState, bodyMissing) {
		t.Fatalf("not-found and wrong-state answers differ:\n%s\n%s", bodyState, bodyMissing)
	}
	// Fast track widens the allowed states.
	e.backend.Update(nodeID, func(n *agentclient.Node) { n.FastTrack = true })
	st, body := e.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusOK, body)
	// Every allowed state, and a few refused ones, without fast track.
	e.backend.Update(nodeID, func(n *agentclient.Node) { n.FastTrack = false })
	for state, ok := range map[string]bool{
		"deploying": true, "wait call-back": true, "cleaning": true, "clean wait": true, "inspecting": true,
		"inspect wait": true, "rescuing": true, "rescue wait": true, "service wait": true,
		"active": false, "manageable": false, "enroll": false, "deploy failed": false, "servicing": false,
	} {
		e.backend.Update(nodeID, func(n *agentclient.Node) { n.ProvisionState = statemachine.State(state) })
		st, body := e.lookup("addresses="+nodeMAC, "1.62")
		if (st == http.StatusOK) != ok {
			t.Errorf("state %q: HTTP %d: %s", state, st, body)
		}
	}
	u := newHandlerEnv(t, agentclient.HandlerConfig{UnrestrictedLookup: true}, "active")
	st, body = u.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusOK, body)
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func TestLookupTokenDisclosedOnce(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	st, body := e.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusOK, body)
	var lr agentclient.LookupResponse
	if err := json.Unmarshal(body, &lr); err != nil {
		t.Fatal(err)
	}
	tok := lr.Config.AgentToken
	if !tokenRE.MatchString(tok) {
		t.Fatalf("token %q is not 43 URL-safe characters", tok)
	}
	if lr.Node.DriverInternalInfo[driver.InternalAgentToken] != agentclient.MaskedToken {
		t.Fatalf("driver_internal_info token not masked: %v", lr.Node.DriverInternalInfo)
	}
	n, _ := e.backend.Node(nodeID)
	if n.AgentToken != tok {
		t.Fatal("the disclosed token is not the stored one")
	}
	for i := 0; i < 2; i++ {
		st, body = e.lookup("addresses="+nodeMAC, "1.62")
		wantStatus(t, st, http.StatusOK, body)
		var again agentclient.LookupResponse
		_ = json.Unmarshal(body, &again)
		if again.Config.AgentToken != agentclient.MaskedToken {
			t.Fatalf("lookup %d disclosed the token again: %q", i+2, again.Config.AgentToken)
		}
		if strings.Contains(string(body), tok) {
			t.Fatal("token appears in a later lookup body")
		}
	}
	if strings.Contains(e.logs.String(), tok) {
		t.Fatal("token appears in the logs")
	}
}

func TestLookupResponseShape(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{HeartbeatTimeout: 120 * time.Second, PublicURL: "https://api.example:6385/"}, "clean wait")
	e.backend.Update(nodeID, func(n *agentclient.Node) { n.ManagementInterface = "redfish" })
	st, body := e.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusOK, body)
	var raw map[string]map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	wantNodeKeys := []string{"uuid", "properties", "instance_info", "driver_internal_info", "links"}
	if len(raw["node"]) != len(wantNodeKeys) {
		t.Errorf("node keys: %v", raw["node"])
	}
	for _, k := range wantNodeKeys {
		if _, ok := raw["node"][k]; !ok {
			t.Errorf("node lacks %q", k)
		}
	}
	for _, k := range []string{"metrics", "metrics_statsd", "heartbeat_timeout", "agent_containers", "agent_token",
		"agent_token_required", "agent_md5_checksum_enable", "disable_deep_image_inspection", "permitted_image_formats",
		"agent_skip_bmc_detect", "enable_bios_bootloader_install", "tls_min_version", "tls_cipher_suites"} {
		if _, ok := raw["config"][k]; !ok {
			t.Errorf("config lacks %q", k)
		}
	}
	cfg := raw["config"]
	if cfg["heartbeat_timeout"] != float64(120) || cfg["agent_token_required"] != true || cfg["agent_skip_bmc_detect"] != true || cfg["tls_min_version"] != "1.3" {
		t.Errorf("config values: %v", cfg)
	}
	ii := raw["node"]["instance_info"].(map[string]any)
	for _, k := range []string{"configdrive", "image_url", "admin_password"} {
		if ii[k] != agentclient.MaskedToken {
			t.Errorf("instance_info[%q] = %v, want masked", k, ii[k])
		}
	}
	if ii["image_source"] != "http://img" {
		t.Errorf("image_source changed: %v", ii["image_source"])
	}
	links := raw["node"]["links"].([]any)
	if links[0].(map[string]any)["href"] != "https://api.example:6385/v1/nodes/"+nodeID {
		t.Errorf("links: %v", links)
	}
}

func TestLookupLockedNode(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	e.backend.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "conductor-2" })
	st, body := e.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusConflict, body)
	// Once a token exists only a shared lock is needed: a reserved node
	// still answers, with the masked token.
	e.backend.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "" })
	_ = e.token()
	e.backend.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "conductor-2" })
	st, body = e.lookup("addresses="+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusOK, body)
}

// beat is a valid heartbeat body for the node's token.
func beat(tok string) map[string]any {
	return map[string]any{"callback_url": agentURL, "agent_token": tok, "agent_version": "10.0.0"}
}

func TestHeartbeatAccepted(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 0, 0, 123456000, time.UTC)
	e := newHandlerEnv(t, agentclient.HandlerConfig{Clock: fixedClock{now}}, "clean wait")
	tok := e.token()
	_, pemText, err := agenttest.SelfSignedCert(now)
	if err != nil {
		t.Fatal(err)
	}
	body := beat(tok)
	body["agent_verify_ca"] = pemText
	st, msg := e.heartbeat(nodeID, "1.68", body)
	wantStatus(t, st, http.StatusAccepted, msg)
	n, _ := e.backend.Node(nodeID)
	if n.AgentURL != agentURL || n.AgentVerifyCA != pemText {
		t.Fatalf("recorded url %q, ca pinned %v", n.AgentURL, n.AgentVerifyCA == pemText)
	}
	if got := n.DriverInternalInfo[driver.InternalAgentLastHeartbeat]; got != "2026-11-29T18:00:00.123456" {
		t.Fatalf("agent_last_heartbeat = %v", got)
	}
	if n.DriverInternalInfo[driver.InternalAgentVersion] != "10.0.0" {
		t.Fatalf("agent_version = %v", n.DriverInternalInfo[driver.InternalAgentVersion])
	}
	// By name too, and the same certificate again is fine.
	st, msg = e.heartbeat("node-0", "1.68", body)
	wantStatus(t, st, http.StatusAccepted, msg)
	if e.backend.HeartbeatCount(nodeID) != 2 {
		t.Fatalf("heartbeats recorded: %d", e.backend.HeartbeatCount(nodeID))
	}
	if strings.Contains(e.logs.String(), tok) {
		t.Fatal("token logged")
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                         { return c.t }
func (c fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func TestHeartbeatChecks(t *testing.T) {
	_, pemA, err := agenttest.SelfSignedCert(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, pemB, _ := agenttest.SelfSignedCert(time.Now())
	type setup func(e *handlerEnv, tok string)
	cases := []struct {
		name    string
		cfg     agentclient.HandlerConfig
		setup   setup
		ident   string
		version string
		body    func(tok string) map[string]any
		raw     string
		want    int
		wantMsg string
	}{
		{name: "no version header", version: "", want: 404},
		{name: "before 1.22", version: "1.21", want: 404},
		{name: "bad version", version: "x", want: 406},
		{name: "malformed JSON", raw: `{"callback_url": `, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "JSON array", raw: `[]`, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "JSON null", raw: `null`, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "unknown field", raw: `{"callback_url":"https://a:1","bogus":1}`, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "non-string field", raw: `{"callback_url":5}`, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "field name in another case", raw: `{"CALLBACK_URL":"https://10.0.0.5:9999","agent_token":"x","agent_version":"1"}`, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "field name twice in two cases", raw: `{"callback_url":"https://10.0.0.5:9999","Callback_Url":"https://10.9.9.9:1","agent_token":"x","agent_version":"1"}`, want: 400, wantMsg: "Invalid heartbeat body"},
		{name: "agent_version before 1.36", version: "1.35", body: beat, want: 400, wantMsg: "agent_version requires"},
		{name: "agent_token before 1.62", version: "1.61", body: beat, want: 400, wantMsg: "agent_token requires"},
		{name: "agent_verify_ca before 1.68", version: "1.67", body: func(tok string) map[string]any {
			b := beat(tok)
			b["agent_verify_ca"] = pemA
			return b
		}, want: 400, wantMsg: "agent_verify_ca requires"},
		{name: "agent_status before 1.72", version: "1.71", body: func(tok string) map[string]any {
			b := beat(tok)
			b["agent_status"] = "start"
			return b
		}, want: 400, wantMsg: "agent_status requires"},
		{name: "callback_url missing", body: func(tok string) map[string]any { return map[string]any{"agent_token": tok, "agent_version": "1"} }, want: 400, wantMsg: "callback_url"},
		{name: "callback_url not http", body: func(tok string) map[string]any {
			b := beat(tok)
			b["callback_url"] = "ftp://10.0.0.5:9999"
			return b
		}, want: 400, wantMsg: "Invalid callback_url"},
		{name: "callback_url IPv6 without brackets", body: func(tok string) map[string]any {
			b := beat(tok)
			b["callback_url"] = "https://fd00:a6::64:9999"
			return b
		}, want: 400, wantMsg: "Invalid callback_url"},
		{name: "callback_url empty without agent_status", body: func(tok string) map[string]any {
			b := beat(tok)
			b["callback_url"] = ""
			return b
		}, want: 400, wantMsg: "Invalid callback_url"},
		{name: "bad agent_status", version: "1.72", body: func(tok string) map[string]any {
			b := beat(tok)
			b["agent_status"] = "running"
			return b
		}, want: 400, wantMsg: "Unknown agent_status"},
		{name: "unknown node", ident: "no-such-node", body: beat, want: 404},
		{name: "callback URL changed", setup: func(e *handlerEnv, _ string) {
			e.backend.Update(nodeID, func(n *agentclient.Node) { n.AgentURL = "https://10.0.0.6:9999" })
		}, body: beat, want: 400, wantMsg: "callback URL changed"},
		{name: "callback URL changed is checked before the token", setup: func(e *handlerEnv, _ string) {
			e.backend.Update(nodeID, func(n *agentclient.Node) { n.AgentURL = "https://10.0.0.6:9999" })
		}, body: func(string) map[string]any { return map[string]any{"callback_url": agentURL, "agent_version": "1"} }, want: 400, wantMsg: "callback URL changed"},
		{name: "token missing", body: func(string) map[string]any { return map[string]any{"callback_url": agentURL, "agent_version": "1"} }, want: 400, wantMsg: "token is required"},
		{name: "agent_version missing", body: func(tok string) map[string]any { return map[string]any{"callback_url": agentURL, "agent_token": tok} }, want: 400, wantMsg: "upgrade the agent"},
		{name: "wrong token", body: func(tok string) map[string]any { return beat(tok[:42] + "x") }, want: 400, wantMsg: "Invalid or missing agent token"},
		{name: "node has no token", setup: func(e *handlerEnv, _ string) {
			e.backend.Update(nodeID, func(n *agentclient.Node) { n.AgentToken = "" })
		}, body: beat, want: 400, wantMsg: "Invalid or missing agent token"},
		{name: "wrong token is checked before TLS", body: func(tok string) map[string]any {
			b := beat("wrong")
			b["callback_url"] = "http://10.0.0.5:9999"
			return b
		}, want: 400, wantMsg: "Invalid or missing agent token"},
		{name: "TLS required", body: func(tok string) map[string]any {
			b := beat(tok)
			b["callback_url"] = "http://10.0.0.5:9999"
			return b
		}, want: 400, wantMsg: "TLS is required"},
		{name: "TLS not required", cfg: agentclient.HandlerConfig{AllowInsecureCallback: true}, body: func(tok string) map[string]any {
			b := beat(tok)
			b["callback_url"] = "http://10.0.0.5:9999"
			return b
		}, want: 202},
		{name: "callback_url with a bracketed IPv6 literal", body: func(tok string) map[string]any {
			b := beat(tok)
			b["callback_url"] = "https://[fd00:a6::64]:9999"
			return b
		}, want: 202},
		{name: "certificate not PEM", body: func(tok string) map[string]any {
			b := beat(tok)
			b["agent_verify_ca"] = "hello"
			return b
		}, want: 400, wantMsg: "not a PEM certificate"},
		{name: "certificate differs from the pinned one", setup: func(e *handlerEnv, _ string) {
			e.backend.Update(nodeID, func(n *agentclient.Node) { n.AgentVerifyCA = pemB })
		}, body: func(tok string) map[string]any {
			b := beat(tok)
			b["agent_verify_ca"] = pemA
			return b
		}, want: 400, wantMsg: "differs from the one pinned"},
		{name: "locked node without agent_url", setup: func(e *handlerEnv, _ string) {
			e.backend.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "conductor-2" })
		}, body: beat, want: 409, wantMsg: "locked"},
		{name: "locked node with agent_url", setup: func(e *handlerEnv, _ string) {
			e.backend.Update(nodeID, func(n *agentclient.Node) { n.Reservation = "conductor-2"; n.AgentURL = agentURL })
		}, body: beat, want: 202},
		{name: "anaconda status without version or URL", version: "1.72", body: func(tok string) map[string]any {
			return map[string]any{"callback_url": "", "agent_token": tok, "agent_status": "end", "agent_status_message": "done"}
		}, want: 202},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newHandlerEnv(t, tc.cfg, "clean wait")
			tok := e.token()
			if tc.setup != nil {
				tc.setup(e, tok)
			}
			ident := tc.ident
			if ident == "" {
				ident = nodeID
			}
			version := tc.version
			if version == "" && tc.name != "no version header" {
				version = "1.68"
			}
			var raw string
			if tc.raw != "" {
				raw = tc.raw
			} else {
				body := beat(tok)
				if tc.body != nil {
					body = tc.body(tok)
				}
				b, _ := json.Marshal(body)
				raw = string(b)
			}
			before, _ := e.backend.Node(nodeID)
			st, data, _ := e.do(http.MethodPost, "/v1/heartbeat/"+ident, version, raw)
			msg := string(data)
			if ie, ok := agentclient.ParseIronicError(data); ok {
				msg = ie.Faultstring
			}
			if st != tc.want || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("HTTP %d %q, want %d containing %q", st, msg, tc.want, tc.wantMsg)
			}
			if st != http.StatusAccepted {
				after, _ := e.backend.Node(nodeID)
				if e.backend.HeartbeatCount(nodeID) != 0 || after.AgentURL != before.AgentURL || after.AgentVerifyCA != before.AgentVerifyCA {
					t.Fatal("a refused heartbeat changed the node")
				}
			}
			if strings.Contains(e.logs.String(), tok) {
				t.Fatal("token logged")
			}
		})
	}
}

// lockingBackend fails RecordHeartbeat with a configurable error.
type lockingBackend struct {
	*agenttest.Backend
	err error
}

func (b lockingBackend) RecordHeartbeat(ctx context.Context, hb agentclient.Heartbeat) error {
	return b.err
}

func TestHeartbeatBackendErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{agentclient.ErrNodeLocked, http.StatusConflict},
		{agentclient.ErrNodeNotFound, http.StatusNotFound},
		{errors.New("database on fire"), http.StatusInternalServerError},
	} {
		mem := agenttest.NewBackend()
		_ = mem.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "clean wait"}, nodeMAC)
		h, _ := agentclient.NewHandler(lockingBackend{mem, tc.err}, agentclient.HandlerConfig{})
		srv := httptest.NewServer(h)
		e := &handlerEnv{t: t, url: srv.URL, backend: mem}
		tok := e.token()
		st, msg := e.heartbeat(nodeID, "1.68", beat(tok))
		srv.Close()
		if st != tc.want {
			t.Errorf("%v: HTTP %d (%s), want %d", tc.err, st, msg, tc.want)
		}
		if tc.want == 500 && strings.Contains(msg, "fire") {
			t.Errorf("internal error leaked to the agent: %s", msg)
		}
	}
}

func TestHeartbeatAnswersWithoutWaitingForProcessing(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	release := make(chan struct{})
	processed := make(chan struct{})
	e.backend.OnHeartbeat = func(agentclient.Heartbeat) {
		<-release
		close(processed)
	}
	tok := e.token()
	done := make(chan int, 1)
	go func() {
		st, _ := e.heartbeat(nodeID, "1.68", beat(tok))
		done <- st
	}()
	select {
	case st := <-done:
		if st != http.StatusAccepted {
			t.Fatalf("HTTP %d", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("heartbeat waited for processing")
	}
	close(release)
	<-processed
}

func TestNewHandlerValidation(t *testing.T) {
	if _, err := agentclient.NewHandler(nil, agentclient.HandlerConfig{}); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Fatalf("nil backend: %v", err)
	}
	if _, err := agentclient.NewHandler(agenttest.NewBackend(), agentclient.HandlerConfig{PublicURL: "ftp://x"}); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Fatalf("bad PublicURL: %v", err)
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		tok, err := agentclient.NewToken(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !tokenRE.MatchString(tok) || seen[tok] {
			t.Fatalf("token %q malformed or repeated", tok)
		}
		seen[tok] = true
	}
	if _, err := agentclient.NewToken(strings.NewReader("short")); err == nil {
		t.Fatal("a short random source did not fail")
	}
	if agentclient.TokensEqual("", "") {
		t.Fatal("an empty stored token matched")
	}
}
