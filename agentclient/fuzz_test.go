package agentclient_test

import (
	"bufio"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

const fuzzToken = "Jb7iJ2V1q1sA0Gzh0nU4dXCmz1Y6-5uZC7J0wZq3o5A"

func fuzzHandler(t testing.TB) (*agentclient.Handler, *agenttest.Backend) {
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{UUID: nodeID, Name: "node-0", ProvisionState: "clean wait", AgentToken: fuzzToken}, nodeMAC); err != nil {
		t.Fatal(err)
	}
	h, err := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return h, b
}

// FuzzHeartbeat feeds arbitrary node identifiers, versions and bodies to
// the heartbeat endpoint, the identifier both path-escaped and, when it
// forms a request target, as it is: the answer is 202 or a 4xx, never a
// panic, a 5xx or a redirect (a 307 to the cleaned path was its first
// crasher, /v1/heartbeat/.), and a refused heartbeat changes nothing.
func FuzzHeartbeat(f *testing.F) {
	f.Add(nodeID, "1.68", `{"callback_url":"https://10.0.0.5:9999","agent_token":"`+fuzzToken+`","agent_version":"10.0.0"}`)
	f.Add("node-0", "1.72", `{"callback_url":"","agent_token":"`+fuzzToken+`","agent_status":"end","agent_status_message":"ok"}`)
	f.Add(nodeID, "1.62", `{"callback_url":"http://10.0.0.5:9999","agent_token":"x","agent_version":"1"}`)
	f.Add(nodeID, "1.68", `{"callback_url":"https://a:1","agent_token":"`+fuzzToken+`","agent_version":"1","agent_verify_ca":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}`)
	f.Add(nodeID, "latest", `{"callback_url":5}`)
	f.Add("", "1.1", `null`)
	f.Add("../x", "9.9", `{"callback_url":"https://a:1","bogus":true}`)
	f.Add(nodeID, "1.68", "{\"callback_url\":\"https://\u0000\"}")
	f.Add(".", "1.68", `{}`)
	f.Add("a/../"+nodeID, "1.68", `{}`)
	f.Add("%2e%2e", "1.68", `{}`)
	h, b := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, ident, version, body string) {
		targets := []string{"/v1/heartbeat/" + url.PathEscape(ident)}
		if raw := "/v1/heartbeat/" + ident; parsesAsTarget(raw) {
			targets = append(targets, raw)
		}
		for _, target := range targets {
			before, _ := b.Node(nodeID)
			count := b.HeartbeatCount(nodeID)
			req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
			if version != "" {
				req.Header.Set(agentclient.HeaderAPIVersion, version)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 300 && rec.Code < 400 || rec.Header().Get("Location") != "" {
				t.Fatalf("HTTP %d (Location %q) for %s: a heartbeat is never redirected", rec.Code, rec.Header().Get("Location"), target)
			}
			switch rec.Code {
			case 202, 400, 404, 406, 409:
			default:
				t.Fatalf("HTTP %d for target %q version %q body %q: %s", rec.Code, target, version, body, rec.Body)
			}
			if rec.Code != 202 {
				if _, ok := agentclient.ParseIronicError(rec.Body.Bytes()); !ok {
					t.Fatalf("HTTP %d for %s without Ironic's error body: %s", rec.Code, target, rec.Body)
				}
				after, _ := b.Node(nodeID)
				if b.HeartbeatCount(nodeID) != count || after.AgentURL != before.AgentURL || after.AgentVerifyCA != before.AgentVerifyCA {
					t.Fatalf("refused heartbeat (HTTP %d) changed the node", rec.Code)
				}
			}
			// The stored token is never disclosed; the answer may only
			// quote it where the client sent it (a callback_url holding
			// the token's text, quoted in the refusal).
			if strings.Contains(rec.Body.String(), fuzzToken) && !strings.Contains(target+body, fuzzToken) {
				t.Fatal("token echoed")
			}
		}
	})
}

// parsesAsTarget reports whether target is a request target a server
// would read from the wire (httptest.NewRequest panics on any other).
func parsesAsTarget(target string) bool {
	_, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST " + target + " HTTP/1.1\r\nHost: x\r\n\r\n")))
	return err == nil
}

// FuzzLookup feeds arbitrary query strings and versions to the lookup
// endpoint: 200 or a 4xx, never a panic or a 5xx; only a 200 may create a
// token, and a token is disclosed at most once.
func FuzzLookup(f *testing.F) {
	f.Add("addresses="+nodeMAC, "1.62")
	f.Add("node_uuid="+nodeID, "1.22")
	f.Add("addresses=zz,,52-54-00-AA-BB-01&node_uuid=", "latest")
	f.Add("node_uuid=%00", "1.62")
	f.Add("addresses="+strings.Repeat("a", 300), "1.0")
	f.Add(";;&&==", "")
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "clean wait"}, nodeMAC); err != nil {
		f.Fatal(err)
	}
	h, _ := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	disclosed := ""
	f.Fuzz(func(t *testing.T, query, version string) {
		before, _ := b.Node(nodeID)
		req := httptest.NewRequest(http.MethodGet, "/v1/lookup", nil)
		req.URL.RawQuery = query
		if version != "" {
			req.Header.Set(agentclient.HeaderAPIVersion, version)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 404, 406, 409:
		default:
			t.Fatalf("HTTP %d for query %q: %s", rec.Code, query, rec.Body)
		}
		after, _ := b.Node(nodeID)
		if rec.Code != 200 && after.AgentToken != before.AgentToken {
			t.Fatal("a refused lookup changed the token")
		}
		if after.AgentToken != "" && strings.Contains(rec.Body.String(), after.AgentToken) {
			if disclosed != "" && disclosed == after.AgentToken {
				t.Fatal("token disclosed twice")
			}
			disclosed = after.AgentToken
		}
	})
}

// FuzzDecodeCommandResult decodes arbitrary agent answers: a typed
// ErrAgentAPI error or a usable value, never a panic.
func FuzzDecodeCommandResult(f *testing.F) {
	f.Add([]byte(`{"id":"1","command_name":"execute_clean_step","command_status":"SUCCEEDED","command_error":null,"command_result":{"clean_result":null,"clean_step":{"interface":"deploy","step":"erase_devices","priority":10}}}`))
	f.Add([]byte(`{"id":"1","command_name":"get_clean_steps","command_status":"SUCCEEDED","command_result":{"clean_steps":{"GenericHardwareManager":[{"interface":"deploy","step":"x","priority":1,"abortable":true}]},"hardware_manager_version":{"generic_hardware_manager":"1.2"}}}`))
	f.Add([]byte(`{"id":"1","command_name":"x","command_status":"FAILED","command_error":{"type":"TypeError","code":"500","message":"m","details":{"a":1}}}`))
	f.Add([]byte(`{"id":"1","command_name":"x","command_status":"CLEAN_VERSION_MISMATCH","command_error":"bare string"}`))
	f.Add([]byte(`{"commands":[{"id":"1","command_name":"x","command_status":"RUNNING"}]}`))
	f.Add([]byte(`{"commands":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := agentclient.DecodeCommandResult(b)
		if err != nil {
			if !errors.Is(err, agentclient.ErrAgentAPI) {
				t.Fatalf("untyped error %v", err)
			}
		} else {
			_ = r.Err(nodeID, "x.y")
			_ = r.Error.String()
			for _, k := range []steps.Kind{steps.Clean, steps.Deploy, steps.Service} {
				if _, err := agentclient.DecodeStepsResult(k, r); err != nil && !errors.Is(err, agentclient.ErrAgentAPI) {
					t.Fatalf("steps: untyped error %v", err)
				}
				if _, err := agentclient.DecodeStepResult(k, r); err != nil && !errors.Is(err, agentclient.ErrAgentAPI) {
					t.Fatalf("step: untyped error %v", err)
				}
			}
		}
		if _, err := agentclient.DecodeCommandList(b); err != nil && !errors.Is(err, agentclient.ErrAgentAPI) {
			t.Fatalf("list: untyped error %v", err)
		}
		if _, err := agentclient.DecodeHeartbeatRequest(b); err != nil && !errors.Is(err, agentclient.ErrInvalidArgument) {
			t.Fatalf("heartbeat: untyped error %v", err)
		}
	})
}
