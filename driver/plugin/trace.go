package plugin

import (
	"context"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"

	"github.com/anvilmetal/anvil/driver"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// Tracing across the plugin boundary. The host starts a client span per
// operation it sends (when HostConfig.TracerProvider is set) and always
// passes the caller's trace context on, in the request's trace_context
// field (W3C Trace Context: traceparent, tracestate) and, for a call sent
// as a unary Invoke, in its gRPC metadata; calls on a Session stream share
// the stream's metadata, hence the field. The plugin continues that trace
// with a server span per operation, exported by its own TracerProvider
// (ServeConfig.TracerProvider, or an OTLP exporter configured by the
// standard OTEL_EXPORTER_OTLP_* environment variables, which the host can
// set through HostConfig.PluginEnv). The driver's code receives the
// span's context and may add its own spans.

// TracerName is the instrumentation name of the spans of package plugin.
const TracerName = "github.com/anvilmetal/anvil/driver/plugin"

// traceProp reads and writes W3C Trace Context.
var traceProp = propagation.TraceContext{}

// tracerOf returns tp's tracer, or a no-op one for nil. A no-op tracer's
// spans keep their parent's context, so the trace still crosses.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// startCall starts the host's span of one operation and writes the trace
// context into req.
func (x *proxy) startCall(ctx context.Context, t *driver.Task, op string, req *pb.InvokeRequest) (context.Context, trace.Span) {
	ctx, span := x.plugin.host.tracer.Start(ctx, "driver "+string(x.kind)+"."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("anvil.plugin", x.plugin.Name()),
			attribute.String("anvil.driver.interface", string(x.kind)),
			attribute.String("anvil.driver.implementation", x.name),
			attribute.String("anvil.driver.operation", op),
			attribute.String("anvil.node.uuid", t.NodeUUID),
		))
	if trace.SpanContextFromContext(ctx).IsValid() {
		req.TraceContext = map[string]string{}
		traceProp.Inject(ctx, propagation.MapCarrier(req.TraceContext))
	}
	return ctx, span
}

// endSpan ends span with err as its status.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// withTraceMetadata adds req's trace context to the outgoing gRPC
// metadata of a unary call.
func withTraceMetadata(ctx context.Context, req *pb.InvokeRequest) context.Context {
	for k, v := range req.TraceContext {
		ctx = metadata.AppendToOutgoingContext(ctx, k, v)
	}
	return ctx
}

// remoteContext returns ctx carrying the host's trace context of req:
// from the request's field, else from the unary call's gRPC metadata.
func remoteContext(ctx context.Context, req *pb.InvokeRequest) context.Context {
	if len(req.TraceContext) > 0 {
		return traceProp.Extract(ctx, propagation.MapCarrier(req.TraceContext))
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("traceparent")) > 0 {
		carrier := propagation.MapCarrier{"traceparent": md.Get("traceparent")[0]}
		if ts := md.Get("tracestate"); len(ts) > 0 {
			carrier["tracestate"] = ts[0]
		}
		return traceProp.Extract(ctx, carrier)
	}
	return ctx
}

// startServe starts the plugin's span of one operation, a child of the
// host's. Without a parent there is no span: the plugin traces only what
// a traced host asks for.
func (s *server) startServe(ctx context.Context, req *pb.InvokeRequest) (context.Context, trace.Span) {
	ctx = remoteContext(ctx, req)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return s.tracer.Start(ctx, "plugin "+req.Kind+"."+req.Operation, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("anvil.plugin", s.name),
			attribute.String("anvil.driver.interface", req.Kind),
			attribute.String("anvil.driver.implementation", req.Implementation),
			attribute.String("anvil.driver.operation", req.Operation),
		))
}

// envTracerProvider returns a TracerProvider exporting to the OTLP
// endpoint the standard environment variables name
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, and
// the exporter's other OTEL_EXPORTER_OTLP_* options), with service.name
// anvil-driver-<name> unless OTEL_SERVICE_NAME says otherwise; nil when
// no endpoint is set or OTEL_TRACES_EXPORTER is "none". shutdown flushes
// what is left, bounded.
func envTracerProvider(name string) (tp trace.TracerProvider, shutdown func(), err error) {
	if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") ||
		(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "") {
		return nil, func() {}, nil
	}
	exp, err := otlptracegrpc.New(context.Background())
	if err != nil {
		return nil, func() {}, err
	}
	service := os.Getenv("OTEL_SERVICE_NAME")
	if service == "" {
		service = ExecutablePrefix + name
	}
	res := sdkresource.NewSchemaless(attribute.String("service.name", service))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(500*time.Millisecond)), sdktrace.WithResource(res))
	return sdk, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sdk.Shutdown(ctx)
	}, nil
}
