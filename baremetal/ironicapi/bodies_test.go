package ironicapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
)

// startRequest sends a request's head announcing size body bytes and
// the first sent of them, and returns the connection (the rest of the
// body never comes unless the caller writes it).
func startRequest(t *testing.T, addr, method, path string, size int, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-OpenStack-Ironic-API-Version: 1.89\r\nContent-Length: %d\r\n\r\n", method, path, addr, size)
	if sent > 0 {
		if _, err := c.Write([]byte(strings.Repeat(" ", sent))); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// readResponse reads the response on c, failing t after within.
func readResponse(t *testing.T, c net.Conn, within time.Duration) *http.Response {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response within %v: %v", within, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

// TestAnnouncedOversizeRefusedUnread: a body announced larger than the
// endpoint's limit gets 413 at once, before a byte of it is sent; it is
// not read for the server's whole read timeout.
func TestAnnouncedOversizeRefusedUnread(t *testing.T) {
	l := newLab(t)
	addr := strings.TrimPrefix(l.srv.URL, "http://")
	for _, tc := range []struct{ method, path string }{
		{"PATCH", "/v1/nodes/some-node"},
		{"POST", "/v1/nodes"},
		{"PUT", "/v1/nodes/some-node/states/provision"},
	} {
		size := ironicapi.DefaultMaxBodyBytes + 1
		if strings.HasSuffix(tc.path, "/provision") {
			size = ironicapi.DefaultMaxProvisionBodyBytes + 1
		}
		c := startRequest(t, addr, tc.method, tc.path, size, 0)
		resp := readResponse(t, c, 5*time.Second)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "larger than") {
			t.Errorf("%s %s announcing %d bytes: %d %s, want 413", tc.method, tc.path, size, resp.StatusCode, body)
		}
	}
}

// TestBodyBudgetRefusesWithRetryAfter: while the bodies in flight fill
// the listener's budget, another body waits briefly and then gets 503
// with Retry-After; once the first is gone, the next one is served.
func TestBodyBudgetRefusesWithRetryAfter(t *testing.T) {
	l := newLab(t, func(_ *conductor.Options, o *ironicapi.Options) {
		o.MaxInFlightBodyBytes = 3 << 20
		o.BodyBudgetWait = 300 * time.Millisecond
	})
	addr := strings.TrimPrefix(l.srv.URL, "http://")
	const size = 800 << 10
	// The first body arrives slowly and holds its share of the budget.
	slow := startRequest(t, addr, "PATCH", "/v1/nodes/slow-node", size, 10)
	time.Sleep(200 * time.Millisecond)
	c := startRequest(t, addr, "PATCH", "/v1/nodes/other-node", size, size)
	resp := readResponse(t, c, 10*time.Second)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second body while the budget is full: %d (Retry-After %q) %s, want 503 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	_ = slow.Close()
	time.Sleep(200 * time.Millisecond)
	c = startRequest(t, addr, "PATCH", "/v1/nodes/other-node", size, size)
	resp = readResponse(t, c, 10*time.Second)
	if resp.StatusCode == http.StatusServiceUnavailable {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("body after the first one left: 503 %s", body)
	}
}
