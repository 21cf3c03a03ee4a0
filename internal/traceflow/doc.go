// Package traceflow holds the end-to-end test of Anvil's tracing: a
// deploy on a conductor whose driver calls cross into a plugin process,
// exported over OTLP to a collector the test runs, must arrive as one
// trace whose spans form one tree across both processes. The package has
// no code of its own.
package traceflow
