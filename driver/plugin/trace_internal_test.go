package plugin

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// TestRemoteContext checks where a plugin finds the host's trace
// context: the request's field (every call), else a unary call's gRPC
// metadata (a host that sent none in the field), else nowhere.
func TestRemoteContext(t *testing.T) {
	const (
		fieldParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		mdParent    = "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
	)
	md := metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", mdParent))
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		field map[string]string
		want  string
	}{
		{"field", context.Background(), map[string]string{"traceparent": fieldParent}, "0af7651916cd43dd8448eb211c80319c"},
		{"field over metadata", md, map[string]string{"traceparent": fieldParent}, "0af7651916cd43dd8448eb211c80319c"},
		{"metadata", md, nil, "1af7651916cd43dd8448eb211c80319c"},
		{"none", context.Background(), nil, ""},
		{"malformed", context.Background(), map[string]string{"traceparent": "nonsense"}, ""},
	} {
		sc := trace.SpanContextFromContext(remoteContext(tc.ctx, &pb.InvokeRequest{TraceContext: tc.field}))
		got := ""
		if sc.IsValid() {
			got = sc.TraceID().String()
			if !sc.IsRemote() {
				t.Errorf("%s: the parent is not marked remote", tc.name)
			}
		}
		if got != tc.want {
			t.Errorf("%s: trace %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTraceMetadata checks that a unary call carries the request's trace
// context in its outgoing metadata.
func TestTraceMetadata(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req := &pb.InvokeRequest{TraceContext: map[string]string{"traceparent": parent, "tracestate": "k=v"}}
	md, _ := metadata.FromOutgoingContext(withTraceMetadata(context.Background(), req))
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != parent || md.Get("tracestate")[0] != "k=v" {
		t.Fatalf("outgoing metadata %v", md)
	}
	// And the plugin reads it back as the host's span.
	in := metadata.NewIncomingContext(context.Background(), md)
	sc := trace.SpanContextFromContext(remoteContext(in, &pb.InvokeRequest{}))
	want := trace.SpanContextFromContext(traceProp.Extract(context.Background(), propagation.MapCarrier{"traceparent": parent}))
	if !sc.Equal(want.WithTraceState(sc.TraceState())) {
		t.Fatalf("read back %v, want %v", sc, want)
	}
}
