package plugin

import (
	"context"
	"slices"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// Protocol versions. The host accepts the current version and the one
// before it. Version 2 lacks the management capabilities nmi, indicator,
// secure_boot and sensors and the implementations' unavailable reasons
// (a version-2 plugin never advertises them); version 1, no longer
// accepted, also lacked step_preparer and boot_mode.
const (
	ProtocolVersion         = 3
	PreviousProtocolVersion = 2
)

// HostProtocolVersions returns the protocol versions the host accepts,
// newest first.
func HostProtocolVersions() []int { return []int{ProtocolVersion, PreviousProtocolVersion} }

// Handshake is the go-plugin handshake every Anvil driver plugin uses. The
// magic cookie never changes; it only tells a plugin binary that it was
// started by an Anvil host (not by a user at a shell).
func Handshake() goplugin.HandshakeConfig {
	return goplugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   "ANVIL_DRIVER_PLUGIN",
		MagicCookieValue: "7c1d5b0e-anvil-driver-plugin-9f4e2a63",
	}
}

// ExecutablePrefix is the file-name prefix of driver plugin executables in
// a plugin directory: anvil-driver-<name>.
const ExecutablePrefix = "anvil-driver-"

// dispenseName is the name of the one go-plugin plugin in the set.
const dispenseName = "driver"

// maxMessageSize bounds gRPC messages both ways; inventories and BIOS
// registries can be several megabytes.
const maxMessageSize = 64 << 20

// grpcPlugin adapts the Driver gRPC service to go-plugin. On the plugin
// side server is set; on the host side GRPCClient returns the raw stub.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server pb.DriverServer
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterDriverServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewDriverClient(c), nil
}

func pluginSets(versions []int, server pb.DriverServer) map[int]goplugin.PluginSet {
	out := make(map[int]goplugin.PluginSet, len(versions))
	for _, v := range versions {
		out[v] = goplugin.PluginSet{dispenseName: &grpcPlugin{server: server}}
	}
	return out
}

func intersect(a, b []int) []int {
	var out []int
	for _, v := range a {
		if slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}
