package ironicapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/driver"
)

// denyAll is an Authenticator that refuses every request.
type denyAll struct{}

func (denyAll) Authenticate(*http.Request) error {
	return &ironicapi.Error{Status: http.StatusUnauthorized, Message: "Authentication required"}
}

// exchange is one request the agent handler received and what it
// answered.
type exchange struct {
	method, uri, version string
	body                 []byte
	status               int
	header               http.Header
	resp                 []byte
}

// tap sits in front of the agent handler (set once the conductor
// exists) and records what reaches it and what it answers.
type tap struct {
	next atomic.Pointer[agentclient.Handler]
	mu   sync.Mutex
	seen []exchange
}

func (tp *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	tp.next.Load().ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	tp.mu.Lock()
	tp.seen = append(tp.seen, exchange{method: r.Method, uri: r.RequestURI, version: r.Header.Get("X-OpenStack-Ironic-API-Version"),
		body: body, status: rec.Code, header: rec.Header().Clone(), resp: rec.Body.Bytes()})
	tp.mu.Unlock()
}

func (tp *tap) last() (exchange, int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if len(tp.seen) == 0 {
		return exchange{}, 0
	}
	return tp.seen[len(tp.seen)-1], len(tp.seen)
}

// ipa sends a request as IPA does: JSON, with the version header.
func ipa(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.68")
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

func TestRamdiskEndpointsOnTheAPIListener(t *testing.T) {
	tp := &tap{}
	l := newLab(t, func(_ *conductor.Options, o *ironicapi.Options) {
		o.Agent = tp
		o.Auth = denyAll{}
	})
	agent, err := agentclient.NewHandler(l.c.AgentBackend(), agentclient.HandlerConfig{
		Logger: slog.New(slog.DiscardHandler), UnrestrictedLookup: true, AllowInsecureCallback: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	tp.next.Store(agent)
	ctx := context.Background()
	n := l.enroll(t, "ramdisk-1", nil)
	l.port(t, n.UUID, "52:54:00:aa:00:01", nil)

	// The API itself is refused by the Auth...
	for _, path := range []string{"/v1/nodes", "/v1/ports", "/v1/drivers"} {
		st, hdr, body := ipa(t, "GET", l.srv.URL+path, "")
		if st != 401 || hdr.Get("WWW-Authenticate") == "" || faultString(t, string(body)) != "Authentication required" {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
	}
	if _, count := tp.last(); count != 0 {
		t.Fatalf("API requests reached the agent handler: %d", count)
	}

	// ...the ramdisk endpoints are not: each reaches the agent handler as
	// sent, and its answer comes back as the agent handler wrote it.
	check := func(method, path, body string, wantStatus int) []byte {
		t.Helper()
		st, hdr, resp := ipa(t, method, l.srv.URL+path, body)
		ex, _ := tp.last()
		if ex.method != method || ex.uri != path || string(ex.body) != body || ex.version != "1.68" {
			t.Fatalf("%s %s reached the agent handler as %s %s %q (version %q)", method, path, ex.method, ex.uri, ex.body, ex.version)
		}
		if st != ex.status || !bytes.Equal(resp, ex.resp) {
			t.Fatalf("%s %s: client got %d %s, the agent handler wrote %d %s", method, path, st, resp, ex.status, ex.resp)
		}
		for k, v := range ex.header {
			if strings.Join(hdr[k], ",") != strings.Join(v, ",") {
				t.Fatalf("%s %s: header %s %v, the agent handler wrote %v", method, path, k, hdr[k], v)
			}
		}
		if st != wantStatus {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, st, wantStatus, resp)
		}
		return resp
	}
	resp := check("GET", "/v1/lookup?addresses=52:54:00:AA:00:01,52:54:00:bb:00:02", "", http.StatusOK)
	var lookup struct {
		Node struct {
			UUID string `json:"uuid"`
		} `json:"node"`
		Config struct {
			AgentToken string `json:"agent_token"`
		} `json:"config"`
	}
	if err := json.Unmarshal(resp, &lookup); err != nil {
		t.Fatal(err)
	}
	if lookup.Node.UUID != n.UUID || lookup.Config.AgentToken == "" || lookup.Config.AgentToken == "******" {
		t.Fatalf("lookup %s: the node and its new token", resp)
	}
	stored, _ := l.c.Store().GetNode(ctx, n.UUID)
	if tok, _ := stored.DriverInternalInfo[driver.InternalAgentToken].(string); tok != lookup.Config.AgentToken {
		t.Fatalf("the lookup's token is not the node's (%d characters stored)", len(tok))
	}
	hb := `{"callback_url":"http://192.0.2.10:9999","agent_version":"9.0.0","agent_token":"` + lookup.Config.AgentToken + `"}`
	check("POST", "/v1/heartbeat/"+n.UUID, hb, http.StatusAccepted)
	bad := `{"callback_url":"http://192.0.2.10:9999","agent_version":"9.0.0","agent_token":"wrong"}`
	// A wrong token is Ironic's 400, from the agent handler.
	check("POST", "/v1/heartbeat/"+n.UUID, bad, http.StatusBadRequest)
	// continue_inspection for a node that is not being inspected: the
	// agent handler's 404, not the API's.
	inv := `{"inventory":{"interfaces":[{"name":"eth0","mac_address":"52:54:00:aa:00:01"}]}}`
	check("POST", "/v1/continue_inspection", inv, http.StatusNotFound)

	// Without Options.Agent the paths are unknown to the API.
	bare, err := ironicapi.New(ironicapi.Options{Conductor: l.c, Drivers: l.reg, Auth: denyAll{}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	bare.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/lookup?addresses=52:54:00:aa:00:01", nil))
	if rec.Code != http.StatusNotFound || faultString(t, rec.Body.String()) != "The resource could not be found." {
		t.Fatalf("lookup without an agent handler: %d %s", rec.Code, rec.Body)
	}
	// The heartbeat is processed after the 202, under the node's lock:
	// the lock is released once that is done.
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, _ := l.c.Store().GetNode(ctx, n.UUID)
		if after.Reservation == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node left locked by %s", after.Reservation)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
