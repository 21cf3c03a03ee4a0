package plugin

// The plugin transport's gRPC options, for the bare gRPC baseline of
// BenchmarkPowerStateRead.
var (
	DialOptions   = dialOptions
	ServerOptions = serverOptions
)
