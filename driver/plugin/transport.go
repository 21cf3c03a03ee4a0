package plugin

import (
	"google.golang.org/grpc"
)

// windowSize is the static HTTP/2 flow-control window of both ends, per
// stream and per connection. A static window turns off gRPC's bandwidth
// estimator, whose pings otherwise add a frame each way to almost every
// call; over a Unix socket there is no bandwidth-delay product to learn,
// and 16 MiB is the window the estimator grows to at most, so a 64 MiB
// inventory still takes four window updates rather than hundreds.
const windowSize = 16 << 20

// dialOptions are the host's gRPC options for a plugin connection.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
		grpc.WithInitialWindowSize(windowSize), grpc.WithInitialConnWindowSize(windowSize),
	}
}

// serverOptions are the plugin's gRPC server options.
func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageSize), grpc.MaxSendMsgSize(maxMessageSize),
		grpc.InitialWindowSize(windowSize), grpc.InitialConnWindowSize(windowSize),
	}
}
