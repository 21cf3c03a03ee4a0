// Package otlptest is an OpenTelemetry trace receiver for tests: an OTLP
// gRPC collector on a loopback port that keeps every span it is sent, a
// tracer provider exporting to it, and the checks a trace's tree needs
// (one root, every parent present, every plugin call answered by the
// plugin process's span).
package otlptest

import (
	"context"
	"encoding/hex"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Collector is an OTLP trace receiver (gRPC).
type Collector struct {
	coltracepb.UnimplementedTraceServiceServer
	// Addr is its host:port on 127.0.0.1.
	Addr  string
	mu    sync.Mutex
	spans []Span
}

// Span is one received span with the service that sent it.
type Span struct {
	Service string
	Trace   string
	ID      string
	Parent  string
	Name    string
	Kind    tracepb.Span_SpanKind
	Start   uint64
	Events  []string
	Attrs   map[string]string
	Error   bool
}

// Export implements the OTLP trace service.
func (c *Collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.Resource.GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Service: service, Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
					Parent: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Kind: s.Kind, Start: s.StartTimeUnixNano, Attrs: map[string]string{},
					Error: s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, e.Name)
				}
				for _, kv := range s.Attributes {
					sp.Attrs[kv.Key] = kv.Value.GetStringValue()
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans returns every span received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// Start serves a Collector on 127.0.0.1 until tb ends.
func Start(tb testing.TB) *Collector {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	c := &Collector{Addr: ln.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }() // ends at Stop
	tb.Cleanup(srv.Stop)
	return c
}

// Provider is a tracer provider of service exporting to c in batches of
// at most 100 ms, shut down when tb ends.
func (c *Collector) Provider(tb testing.TB, service string) *sdktrace.TracerProvider {
	tb.Helper()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(c.Addr), otlptracegrpc.WithInsecure())
	if err != nil {
		tb.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)),
		sdktrace.WithResource(sdkresource.NewSchemaless(attribute.String("service.name", service))))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// PluginEnv is the environment that makes a plugin process export its
// spans to c (HostConfig.PluginEnv).
func (c *Collector) PluginEnv() []string {
	return []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + c.Addr}
}

// Tree returns the root span named name whose attribute
// anvil.node.uuid is node, and every span of its trace received so far
// (ok false when no such root has arrived). When several match, the last
// received is taken.
func (c *Collector) Tree(name, node string) (root Span, tree []Span, ok bool) {
	all := c.Spans()
	for _, s := range all {
		if s.Name == name && s.Parent == "" && s.Attrs["anvil.node.uuid"] == node {
			root, ok = s, true
		}
	}
	if !ok {
		return root, nil, false
	}
	for _, s := range all {
		if s.Trace == root.Trace {
			tree = append(tree, s)
		}
	}
	return root, tree, true
}

// Connected reports whether spans have one root and every other span's
// parent among them.
func Connected(spans []Span) bool {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.ID] = true
	}
	roots := 0
	for _, s := range spans {
		if s.Parent == "" {
			roots++
		} else if !ids[s.Parent] {
			return false
		}
	}
	return roots == 1
}

// PluginAnswered reports whether spans hold at least one host span of a
// plugin call (a client span with the anvil.plugin attribute) and every
// one of them has a span of the plugin process (service) under it.
func PluginAnswered(spans []Span, service string) bool {
	answered := map[string]bool{}
	for _, s := range spans {
		if s.Service == service {
			answered[s.Parent] = true
		}
	}
	hosts := 0
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.Attrs["anvil.plugin"] != "" {
			hosts++
			if !answered[s.ID] {
				return false
			}
		}
	}
	return hosts > 0
}

// Descends reports whether s has an ancestor named name in byID.
func Descends(byID map[string]Span, s Span, name string) bool {
	for p, ok := byID[s.Parent]; ok; p, ok = byID[p.Parent] {
		if p.Name == name {
			return true
		}
	}
	return false
}

// ByID indexes spans by their ID.
func ByID(spans []Span) map[string]Span {
	m := make(map[string]Span, len(spans))
	for _, s := range spans {
		m[s.ID] = s
	}
	return m
}
