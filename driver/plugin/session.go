package plugin

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// session is the host's end of one Session stream to a plugin process:
// calls are sent on the one stream and their replies matched by id, which
// saves each call the setup and teardown of a gRPC stream (about half the
// transport's cost of a unary call over a Unix socket; see
// BenchmarkPowerStateRead). A receiver goroutine, counted in the host's
// WaitGroup, delivers replies; it ends with the stream, when the session
// is closed or the process goes away, and then fails every pending call
// with the stream's error.
type session struct {
	stream pb.Driver_SessionClient
	cancel context.CancelFunc

	sendMu sync.Mutex // a gRPC stream takes one sender at a time

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan sessionReply
	err     error         // why the stream ended; nil while it is open
	done    chan struct{} // closed when err is set
}

type sessionReply struct {
	resp *pb.InvokeResponse
	err  error
}

// openSession opens a Session stream on rpc and starts its receiver,
// which wg counts.
func openSession(rpc pb.DriverClient, wg *sync.WaitGroup) (*session, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := rpc.Session(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &session{stream: stream, cancel: cancel, pending: map[uint64]chan sessionReply{}, done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.receive()
	}()
	return s, nil
}

func (s *session) receive() {
	for {
		r, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		ch, ok := s.pending[r.Id]
		delete(s.pending, r.Id)
		s.mu.Unlock()
		if ok { // else the caller gave up on it
			ch <- sessionReply{resp: r.Response}
		}
	}
}

// fail ends the session with err: pending and later calls get it.
func (s *session) fail(err error) {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
	for id, ch := range s.pending {
		ch <- sessionReply{err: s.err}
		delete(s.pending, id)
	}
}

// close ends the stream; the plugin's handler returns, so that the
// plugin's graceful shutdown does not wait for it.
func (s *session) close() { s.fail(status.Error(codes.Canceled, "plugin session closed")) }

// unimplemented reports whether err says the plugin serves no Session (it
// was built before Session existed): nothing was run, and the call is
// sent as a unary Invoke instead.
func unimplemented(err error) bool { return status.Code(err) == codes.Unimplemented }

// invoke sends req and waits for its reply or for ctx. An error is the
// stream's (a gRPC status, classified as for a unary call) or ctx's.
func (s *session) invoke(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, error) {
	// As gRPC does for a unary call, a call whose context is already
	// done is not sent.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	call := &pb.SessionCall{Request: req}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		call.TimeoutNs = int64(left)
	}
	ch := make(chan sessionReply, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.nextID++
	call.Id = s.nextID
	s.pending[call.Id] = ch
	s.mu.Unlock()

	s.sendMu.Lock()
	err := s.stream.Send(call)
	s.sendMu.Unlock()
	if err != nil {
		s.mu.Lock()
		delete(s.pending, call.Id)
		s.mu.Unlock()
		if err != io.EOF {
			return nil, err // this message was refused (too large)
		}
		// The stream ended; the receiver learns why.
		<-s.done
		return nil, s.err
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		s.mu.Lock()
		_, waiting := s.pending[call.Id]
		delete(s.pending, call.Id)
		s.mu.Unlock()
		if waiting {
			s.sendMu.Lock()
			_ = s.stream.Send(&pb.SessionCall{Id: call.Id, Cancel: true})
			s.sendMu.Unlock()
		}
		return nil, ctx.Err()
	}
}
