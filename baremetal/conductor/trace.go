package conductor

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"
)

// Tracing (Options.TracerProvider). An operation is one trace: the verb
// that accepts it starts the root span ("deploy", "provide", ...) and
// stores its W3C trace context in the node (driver_internal_info,
// traceKey) with the intent, so that every later piece of the operation,
// wherever and whenever it runs (the worker's job, the heartbeats and
// finished agent commands that continue a wait, on this conductor or on
// the one that takes the node over), is a child of it: "job <op>",
// "heartbeat", "command done", each step ("step <kind>.<interface>.<step>"),
// the agent's commands (agentclient's spans, when its client has the same
// TracerProvider), the wait for an agent command, the driver calls sent to
// plugins (package plugin's spans, continued in the plugin process), and
// the network boot of each ramdisk ("boot", from the boot's preparation
// to the agent's first heartbeat, with one event per boot stage). The key
// is dropped when the node comes to rest (a stable or failure state).

// TracerName is the instrumentation name of the conductor's spans.
const TracerName = "github.com/anvilmetal/anvil/baremetal/conductor"

// traceKey is the driver_internal_info key holding the W3C traceparent
// (and tracestate) of the node's running operation.
const traceKey = "anvil_trace_context"

var traceProp = propagation.TraceContext{}

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName)
}

func nodeAttrs(n *baremetal.Node) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("anvil.node.uuid", n.UUID), attribute.String("anvil.node.name", n.Name)}
}

// startOperation starts the root span of an operation on n, a child of
// ctx's span when it has one (an embedder's request span).
func (c *Conductor) startOperation(ctx context.Context, verb string, n *baremetal.Node) (context.Context, trace.Span) {
	return c.tracer.Start(ctx, verb, trace.WithAttributes(append(nodeAttrs(n), attribute.String("anvil.verb", verb))...))
}

// recordTrace stores ctx's trace context in n for the operation's later
// spans; nothing when ctx carries no recorded trace.
func recordTrace(ctx context.Context, n *baremetal.Node) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return
	}
	carrier := propagation.MapCarrier{}
	traceProp.Inject(ctx, carrier)
	m := make(map[string]any, len(carrier))
	for k, v := range carrier {
		m[k] = v
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[traceKey] = m
}

// operationContext returns ctx with n's operation as the remote parent,
// or ctx unchanged when ctx already has a span or n has no operation.
func operationContext(ctx context.Context, n *baremetal.Node) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	raw, ok := n.DriverInternalInfo[traceKey].(map[string]any)
	if !ok {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	for k, v := range raw {
		if s, ok := v.(string); ok {
			carrier[k] = s
		}
	}
	return traceProp.Extract(ctx, carrier)
}

// startNodeSpan starts a span of n's operation: nothing is recorded for
// a node without one (the span is then a no-op carrying ctx's context).
func (c *Conductor) startNodeSpan(ctx context.Context, n *baremetal.Node, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx = operationContext(ctx, n)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return c.tracer.Start(ctx, name, trace.WithAttributes(append(nodeAttrs(n), attrs...)...))
}

// endSpan ends span, with err as its status.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, describeErr(err))
	}
	span.End()
}

// dropOperationKeys removes the operation's bookkeeping (its trace
// context, when its last heartbeat line was written) from n when the
// state it moves to ends the operation.
func dropOperationKeys(n *baremetal.Node) {
	if statemachine.IsStable(n.ProvisionState) || statemachine.IsFailure(n.ProvisionState) {
		delete(n.DriverInternalInfo, traceKey)
		delete(n.DriverInternalInfo, heartbeatRecordedKey)
	}
}

// traceBoot records the span of a ramdisk boot that just reached its
// agent's first heartbeat: from the boot's preparation to now, one event
// per boot stage (read back from the node's history, where each stage
// was written when it happened).
func (c *Conductor) traceBoot(ctx context.Context, n *baremetal.Node) {
	ctx = operationContext(context.WithoutCancel(ctx), n)
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return
	}
	recs, err := c.bootRecords(ctx, n.UUID)
	if err != nil || len(recs) == 0 {
		return
	}
	// The records of the current attempt start at its last preparation.
	first := 0
	for i, r := range recs {
		if r.Stage == stage.Prepared {
			first = i
		}
	}
	recs = recs[first:]
	_, span := c.tracer.Start(ctx, "boot", trace.WithTimestamp(recs[0].At), trace.WithAttributes(nodeAttrs(n)...))
	for _, r := range recs {
		attrs := []attribute.KeyValue{attribute.String("anvil.boot.detail", r.Phrase())}
		if r.Err != "" {
			attrs = append(attrs, attribute.String("anvil.boot.error", r.Err))
		}
		span.AddEvent(string(r.Stage), trace.WithTimestamp(r.At), trace.WithAttributes(attrs...))
	}
	span.End(trace.WithTimestamp(recs[len(recs)-1].At))
}
