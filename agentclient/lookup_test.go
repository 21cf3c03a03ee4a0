package agentclient_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
)

// addresses returns n comma-separated MAC addresses that match no port,
// with the node's own last when withNode is set.
func addresses(n int, withNode bool) string {
	macs := make([]string, n)
	for i := range macs {
		macs[i] = fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>16, i>>8&0xff, i&0xff)
	}
	if withNode {
		macs[n-1] = nodeMAC
	}
	return strings.Join(macs, ",")
}

// TestLookupAddressBound checks the bound on a lookup's addresses: up to
// MaxLookupAddresses (valid or not) are looked up, one more is refused
// with Ironic's 400 before the backend is asked, so no token is created.
// About 40,000 addresses reached the store and answered 500 ("too many
// SQL variables").
func TestLookupAddressBound(t *testing.T) {
	const tooMany = "Too many addresses: a lookup may carry at most"
	for _, tc := range []struct {
		name  string
		cfg   agentclient.HandlerConfig
		query string
		want  int
		fault string
	}{
		{name: "at the bound", query: "addresses=" + addresses(agentclient.MaxLookupAddresses, true), want: 200},
		{name: "one over the bound", query: "addresses=" + addresses(agentclient.MaxLookupAddresses+1, true), want: 400, fault: tooMany + " 1000 MAC addresses."},
		{name: "forty thousand", query: "addresses=" + addresses(40000, true), want: 400, fault: tooMany + " 1000 MAC addresses."},
		{name: "invalid ones count", query: "addresses=" + strings.Repeat("zz,", agentclient.MaxLookupAddresses) + nodeMAC, want: 400, fault: tooMany},
		{name: "empty items do not count", query: "addresses=" + strings.Repeat(",", 5000) + nodeMAC, want: 200},
		{name: "duplicates count as sent", query: "addresses=" + strings.Repeat(nodeMAC+",", agentclient.MaxLookupAddresses+1), want: 400, fault: tooMany},
		{name: "a configured bound", cfg: agentclient.HandlerConfig{MaxLookupAddresses: 2}, query: "addresses=" + addresses(3, true), want: 400, fault: tooMany + " 2 MAC addresses."},
		{name: "within a configured bound", cfg: agentclient.HandlerConfig{MaxLookupAddresses: 2}, query: "addresses=" + addresses(2, true), want: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newHandlerEnv(t, tc.cfg, "clean wait")
			st, body := e.lookup(tc.query, "1.62")
			wantStatus(t, st, tc.want, truncate(body))
			n, _ := e.backend.Node(nodeID)
			if tc.want != 200 {
				ie, ok := agentclient.ParseIronicError(body)
				if !ok || ie.Faultcode != "Client" || !strings.Contains(ie.Faultstring, tc.fault) {
					t.Fatalf("body %s, want a client fault saying %q", truncate(body), tc.fault)
				}
				if n.AgentToken != "" {
					t.Fatal("a refused lookup created a token")
				}
			} else if n.AgentToken == "" {
				t.Fatal("the lookup created no token")
			}
		})
	}
}

// TestLookupLogsInvalidAddressesOnce checks that the invalid addresses of
// a lookup are logged in one bounded line, not one line each.
func TestLookupLogsInvalidAddressesOnce(t *testing.T) {
	e := newHandlerEnv(t, agentclient.HandlerConfig{}, "clean wait")
	st, body := e.lookup("addresses="+strings.Repeat("not-a-mac-"+strings.Repeat("x", 100)+",", 500)+nodeMAC, "1.62")
	wantStatus(t, st, http.StatusOK, truncate(body))
	logs := e.logs.String()
	if n := strings.Count(logs, "dropping invalid MAC addresses"); n != 1 {
		t.Fatalf("%d log lines about invalid addresses, want 1", n)
	}
	if !strings.Contains(logs, "count=500") || len(logs) > 4096 {
		t.Fatalf("the log line does not give the count or is unbounded (%d bytes): %.300s", len(logs), logs)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// TestLookupAtTheBoundFitsNewServer checks that the two bounds agree: a
// lookup with MaxLookupAddresses addresses, percent-encoded as IPA's HTTP
// library sends them, passes NewServer's header bound and is answered.
func TestLookupAtTheBoundFitsNewServer(t *testing.T) {
	h, _ := fuzzHandlerWith(t, agentclient.HandlerConfig{}, "clean wait")
	addr := serve(t, agentclient.NewServer(h, agentclient.ServerConfig{}))
	q := url.Values{"addresses": {addresses(agentclient.MaxLookupAddresses, true)}}.Encode()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/lookup?"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(agentclient.HeaderAPIVersion, "1.62")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantStatus(t, resp.StatusCode, http.StatusOK, truncate(body))
}
