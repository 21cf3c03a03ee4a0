package main

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// spanSink is an OTLP/gRPC trace receiver: it keeps each span's service,
// name, id and parent id.
type spanSink struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []sunkSpan
}

type sunkSpan struct{ service, name, id, parent string }

func (s *spanSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.Resource.GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.spans = append(s.spans, sunkSpan{service, sp.Name, hex.EncodeToString(sp.SpanId), hex.EncodeToString(sp.ParentSpanId)})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestAnvildExportsTraces starts anvild with [anvil]otlp_traces_endpoint
// pointing at a receiver in the test, manages a node through the API and
// checks that the operation's spans arrive (flushed at shutdown at the
// latest): the verb's root and its job under it, from service anvild.
func TestAnvildExportsTraces(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &spanSink{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, sink)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	d := startAnvild(t, "--otlp-traces-endpoint", "http://"+ln.Addr().String())
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
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var root sunkSpan
	for _, s := range sink.spans {
		if s.name == "manage" && s.parent == "" && s.service == "anvild" {
			root = s
		}
	}
	if root.id == "" {
		t.Fatalf("no manage span from anvild among %+v", sink.spans)
	}
	for _, s := range sink.spans {
		if s.name == "job verify" && s.parent == root.id {
			return
		}
	}
	t.Fatalf("no job under the manage span among %+v", sink.spans)
}
