package agentclient_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
)

// TestUncleanPathsAreNeverRedirected sends requests whose paths
// http.ServeMux would clean and redirect (307) to the handler over the
// wire, without following redirects: every one gets a direct answer with
// Ironic's error body, a 400 naming the identifier when the path is a
// heartbeat whose node segment is not a UUID or node name, else a 404, and
// no refused heartbeat is recorded.
func TestUncleanPathsAreNeverRedirected(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	tok := e.token()
	beatBody, _ := json.Marshal(beat(tok))
	const badIdent = "Expected a logical name or UUID but received "
	const notFound = "The resource could not be found."
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		method, path string
		want         int
		fault        string
	}{
		{"POST", "/v1/heartbeat/.", 400, badIdent + `"."`},
		{"POST", "/v1/heartbeat/..", 400, badIdent + `".."`},
		{"POST", "/v1/heartbeat/./", 400, badIdent + `"."`},
		{"POST", "/v1/heartbeat/%2E", 400, badIdent + `"."`},
		{"POST", "/v1/heartbeat/%2e%2E", 400, badIdent + `".."`},
		{"POST", "/v1/heartbeat/a%2Fb", 400, badIdent + `"a/b"`},
		{"POST", "/v1/heartbeat/..%2F" + nodeID, 400, badIdent + `"../` + nodeID + `"`},
		{"POST", "/v1/heartbeat/node%200", 400, badIdent + `"node 0"`},
		{"POST", "/v1/heartbeat/" + strings.Repeat("n", 256), 400, badIdent},
		{"POST", "/v1/heartbeat/x/.", 404, notFound},
		{"POST", "/v1/heartbeat/x/..", 404, notFound},
		{"POST", "/v1/heartbeat/" + nodeID + "/.", 404, notFound},
		{"POST", "/v1/heartbeat//", 404, notFound},
		{"POST", "/v1/heartbeat//" + nodeID, 404, notFound},
		{"POST", "/v1//heartbeat/" + nodeID, 404, notFound},
		{"POST", "/v1/./heartbeat/" + nodeID, 404, notFound},
		{"POST", "/v1/continue_inspection/.", 404, notFound},
		{"GET", "/v1/heartbeat/.", 404, notFound},
		{"GET", "/v1/./lookup?addresses=" + nodeMAC, 404, notFound},
		{"GET", "/v1//lookup?addresses=" + nodeMAC, 404, notFound},
		{"GET", "/v1/lookup/..?addresses=" + nodeMAC, 404, notFound},
		{"GET", "//v1/lookup?addresses=" + nodeMAC, 404, notFound},
		{"GET", "/v1/.", 404, notFound},
		{"GET", "/./", 404, notFound},
	} {
		req, err := http.NewRequest(tc.method, e.url+tc.path, strings.NewReader(string(beatBody)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(agentclient.HeaderAPIVersion, "1.68")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ie, ok := agentclient.ParseIronicError(body)
		if resp.StatusCode != tc.want || !ok || ie.Faultcode != "Client" || !strings.Contains(ie.Faultstring, tc.fault) {
			t.Errorf("%s %s: HTTP %d (Location %q) %s; want %d with a client fault saying %q",
				tc.method, tc.path, resp.StatusCode, resp.Header.Get("Location"), body, tc.want, tc.fault)
		}
	}
	if n := e.backend.HeartbeatCount(nodeID); n != 0 {
		t.Fatalf("%d refused heartbeats were recorded", n)
	}
	// The clean forms still work, by UUID (any case) and by name.
	for _, ident := range []string{nodeID, strings.ToUpper(nodeID), "node-0"} {
		st, msg := e.heartbeat(ident, "1.68", beat(tok))
		wantStatus(t, st, http.StatusAccepted, msg)
	}
}

// TestConnectIsNotRouted checks that a CONNECT request, which
// http.ServeMux neither cleans nor refuses, gets the 404 of an unknown
// resource.
func TestConnectIsNotRouted(t *testing.T) {
	h, _ := fuzzHandlerWith(t, agentclient.HandlerConfig{}, "clean wait")
	for _, target := range []string{"/v1/heartbeat/" + nodeID, "/v1", "/v1/lookup"} {
		req := httptest.NewRequest(http.MethodConnect, target, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if _, ok := agentclient.ParseIronicError(rec.Body.Bytes()); rec.Code != http.StatusNotFound || !ok {
			t.Errorf("CONNECT %s: HTTP %d %s, want Ironic's 404", target, rec.Code, rec.Body)
		}
	}
}
