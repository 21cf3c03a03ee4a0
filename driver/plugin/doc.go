// Package plugin runs driver implementations out of process, as separate
// executables served over hashicorp/go-plugin, the Go counterpart of
// Ironic's driver entry points. It has two sides.
//
// The vendor side is one function: a plugin's main builds a driver.Bundle
// (hardware types and implementations of the package driver interfaces)
// and calls Serve. Nothing else is needed; the plugin logs hclog JSON to
// stderr and must never write to stdout. Drivers that take a
// *slog.Logger get SlogLogger of the plugin's hclog logger, so that their
// lines reach the host with the plugin's own.
//
// The host side is a Host. Discover scans plugin directories for
// executables named anvil-driver-<name>, checks an optional SHA-256 pin,
// starts each one (gRPC only, the connection authenticated as described
// under "Transport security", a fixed handshake cookie,
// protocol versions ProtocolVersion and PreviousProtocolVersion offered
// through go-plugin's VersionedPlugins) and asks it to describe itself:
// name, version, hardware types, implementations per kind with their
// driver_info properties, steps and vendor methods, optional capabilities
// (step runner and preparer, boot mode, and since protocol 3 NMI,
// indicator, secure boot, sensors and virtual media) and, since protocol 3, why an
// implementation is unavailable on the plugin's host (Status.Unavailable;
// the proxy's driver.Available reports it as a *driver.UnavailableError).
// A version-2 plugin is still accepted and simply offers none of the
// version-3 capabilities. A broken file is reported in the Report (which file, why)
// and skipped; it never stops the host. A plugin that speaks no common
// protocol version is refused with a *ProtocolVersionError naming the
// plugin and both version lists. Register then puts proxies of every
// implementation into a driver.Registry next to the built-ins, where the
// conductor cannot tell them apart.
//
// Every call carries the driver.Task and returns the driver.Changes, so
// plugins stay stateless. Typed driver errors (*driver.UnsupportedError,
// *driver.MissingParameterError, ...) cross the boundary and match with
// errors.Is and errors.As, wrapped in a *RemoteError naming the plugin.
//
// Supervision: a plugin that exits or crashes fails its in-flight calls at
// once with a *CrashError (ErrPluginCrashed) naming the plugin; the next
// call restarts it, immediately after a first crash and then with
// exponential backoff, failing fast with a *BackoffError
// (ErrPluginBackoff) while it waits; Plugin.Status reports health,
// PID, restarts and the last error. Plugin processes get a parent-death
// signal on Linux and also watch their parent, so they never outlive the
// host. Their hclog JSON output on stderr is re-levelled into the host's
// *slog.Logger (HostConfig.Logger): hclog stays inside the plugin
// boundary, and an embedder configures only log/slog. gRPC message limits are raised to
// 64 MiB for inventories and BIOS registries, and the flow-control window
// is a static 16 MiB: gRPC's bandwidth estimator would add a ping each way
// to almost every call, and a Unix socket has no bandwidth-delay product to
// learn.
//
// # Usage
//
// A vendor plugin:
//
//	func main() {
//		plugin.Serve(plugin.ServeConfig{Name: "acme", Version: "1.0.0", Bundle: acme.Bundle()})
//	}
//
// built as anvil-driver-acme into a plugin directory, and a host:
//
//	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{"/var/lib/anvil/plugins"}})
//	defer host.Close()
//	report, err := host.Discover(ctx)
//	for _, skipped := range report.Skipped {
//		log.Printf("driver plugin skipped: %v", skipped)
//	}
//	reg := driver.NewRegistry(cfg)
//	reg.Register(builtin.Bundle(fake.Config{}))
//	host.Register(reg)
//
// See examples/vendor-plugin for a complete plugin with a README, and
// plugins/fake for the built-in fake-hardware served out of process.
// Package driver/plugin/plugintest tests a plugin through its real
// process: build once, discover, register, run the conformance suite.
//
// # Wire contract
//
// A vendor never sees the wire: Serve and Host speak it, and the
// generated gRPC code is internal (driver/plugin/internal/proto, whose
// package doc gives the command that regenerates it). The transport is
// one gRPC service: Describe, and
// Invoke(kind, implementation, operation, task, args_json) returning
// (result_json, changes, error), which the host sends as calls of one
// long-lived Session stream per plugin process (each call and reply
// tagged with an id, a deadline travelling as the time left, a
// cancellation as a message of its own), because a gRPC stream's setup
// and teardown were about half of a unary call's cost over a Unix
// socket. A plugin built before Session existed answers it with
// UNIMPLEMENTED, having run nothing, and then gets its calls as unary
// Invoke: the same messages either way. What travels in Invoke is fixed by the
// operation table in operations.go: every operation name, the kind it
// goes to, the capability it needs, the arguments it reads from args_json
// and the JSON shape of its result. The capability table
// (capabilities.go) gives each capability's kind and first protocol
// version, and the error codes say how typed driver errors are rebuilt.
// testdata/wire-contract.golden renders all three; TestWireContractGolden
// fails on any change to them, so a change to the contract shows up as a
// diff in review, and further tests check that the proxies send and the
// server dispatches exactly the table's rows.
//
// The contract is this table rather than one typed protobuf message per
// operation because the host speaks two protocol versions at once (N and
// N-1) to plugins built at different times. A new operation or capability
// is a new row and a new optional argument is a new key, which an older
// peer never sends or ignores, and the protocol version gates what a
// newer host may send; typed messages would add a request and a response
// message per operation whose evolution would still need the same
// version gating, while the payloads (steps, maps, vendor results) belong
// to packages driver and steps and would stay JSON anyway. The rule for a change:
// adding a row, a capability or an optional argument is compatible and
// needs a "since" protocol version on the capability it belongs to;
// renaming or removing one, or changing an argument's meaning, breaks
// N-1 peers and needs a new ProtocolVersion.
//
// # Tracing
//
// The caller's OpenTelemetry trace context crosses to the plugin with
// every call, in the request's trace_context field (W3C Trace Context;
// calls on one Session stream cannot carry their own gRPC metadata) and,
// for a unary Invoke, in its gRPC metadata too. The field is optional in
// every protocol version: a plugin built before it ignores it. With
// HostConfig.TracerProvider the host records a client span per call
// ("driver <interface>.<operation>"); the plugin records a server span
// under it ("plugin <interface>.<operation>") through
// ServeConfig.TracerProvider or, by default, an OTLP exporter that the
// standard OTEL_EXPORTER_OTLP_* variables configure (HostConfig.PluginEnv
// sets them for every plugin), and hands the span's context to the
// implementation. A plugin traces nothing for an untraced host.
//
// # Transport security
//
// On Linux the host does not use go-plugin's AutoMTLS. It creates a
// directory of its own for each plugin process with os.MkdirTemp (mode
// 0700, owned by the host's user), has the plugin listen on its Unix
// socket there (go-plugin's PLUGIN_UNIX_SOCKET_DIR), and both ends
// authenticate the connection with the kernel's peer credentials
// (SO_PEERCRED) instead of certificates: the host accepts only the process
// it started, the plugin only its parent, both running as the same user.
// The traffic is not encrypted. This is a deliberate decision, for these
// reasons:
//
//   - Authentication is kept, and is stronger: a certificate proved that
//     the peer received a secret through the host's pipe or environment;
//     the kernel names the peer process itself, and a process cannot
//     forge it.
//   - Nobody who could read or alter the plaintext is kept out by TLS.
//     Unix socket traffic cannot be captured by other users; only the
//     host's user and root can enter the directory, and both can already
//     read every secret the calls carry where it is kept (the store's
//     rows or the PostgreSQL password, the host's memory).
//   - Plugins are stateless: a process that reached one anyway would
//     learn nothing and could do only what running the plugin executable
//     itself allows.
//   - TLS cost each call a record encryption and decryption on both ends
//     (about a fifth of the transport's CPU time per call: compare
//     BenchmarkPowerStateRead's grpc-unix-session and
//     grpc-unix-session-mtls rows), and each start a P-521 key generation
//     on each side.
//
// A plugin that the host started without a client certificate (this
// host) serves with the peer check; one given a certificate (a host using
// AutoMTLS) serves TLS as before, so plugins and hosts of either kind work
// together, and a plugin built before this change still gets a host that
// checks who it is talking to. Outside Linux (go-plugin listens on TCP on
// Windows, and the peer credentials are not read elsewhere) AutoMTLS
// stays on.
package plugin
