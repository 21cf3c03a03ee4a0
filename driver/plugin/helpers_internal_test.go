package plugin

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// recordingClient is an in-process pb.DriverClient that records every
// Invoke request and answers through serve when set, else with an empty
// response (no result, no changes, no error).
type recordingClient struct {
	mu    sync.Mutex
	reqs  []*pb.InvokeRequest
	serve *server
}

func (c *recordingClient) Describe(ctx context.Context, in *pb.DescribeRequest, _ ...grpc.CallOption) (*pb.DescribeResponse, error) {
	return c.serve.Describe(ctx, in)
}

func (c *recordingClient) Invoke(ctx context.Context, in *pb.InvokeRequest, _ ...grpc.CallOption) (*pb.InvokeResponse, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, in)
	c.mu.Unlock()
	if c.serve == nil {
		return &pb.InvokeResponse{}, nil
	}
	return c.serve.Invoke(ctx, in)
}

// Session is not served: a plugin made by newTestPlugin has no session.
func (c *recordingClient) Session(context.Context, ...grpc.CallOption) (pb.Driver_SessionClient, error) {
	return nil, status.Error(codes.Unimplemented, "recordingClient serves no Session")
}

// newTestPlugin returns a Plugin whose running instance is rpc, so that
// proxies call it in process.
func newTestPlugin(rpc pb.DriverClient) *Plugin {
	h := NewHost(HostConfig{})
	p := &Plugin{host: h, path: "/test/anvil-driver-x", name: "x"}
	p.cur = &instance{rpc: rpc, version: ProtocolVersion}
	return p
}
