package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/internal/otlptest"
)

// TestAnvildExportsTraces starts anvild with [anvil]otlp_traces_endpoint
// pointing at a receiver in the test, manages a node through the API and
// checks that the operation's spans arrive (flushed at shutdown at the
// latest): the verb's root and its job under it, from service anvild.
func TestAnvildExportsTraces(t *testing.T) {
	col := otlptest.Start(t)
	d := startAnvild(t, "--otlp-traces-endpoint", "http://"+col.Addr)
	hc := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, d.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
	}
	do("POST", "/v1/nodes", `{"name": "traced", "driver": "fake-hardware"}`)
	do("PUT", "/v1/nodes/traced/states/provision", `{"target": "manage"}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, body := get(t, hc, d.URL+"/v1/nodes/traced", "X-OpenStack-Ironic-API-Version", "1.78")
		if code == 200 && strings.Contains(body, `"provision_state":"manageable"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not become manageable: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := d.stop(t, 20*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	spans := col.Spans()
	var root otlptest.Span
	for _, s := range spans {
		if s.Name == "manage" && s.Parent == "" && s.Service == "anvild" {
			root = s
		}
	}
	if root.ID == "" {
		t.Fatalf("no manage span from anvild among %+v", spans)
	}
	for _, s := range spans {
		if s.Name == "job verify" && s.Parent == root.ID {
			return
		}
	}
	t.Fatalf("no job under the manage span among %+v", spans)
}
