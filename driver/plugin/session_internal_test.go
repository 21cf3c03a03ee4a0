package plugin

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// unaryOnly is a plugin server from before Session existed: it serves
// Describe and Invoke only.
type unaryOnly struct {
	pb.UnimplementedDriverServer
	s *server
}

func (u unaryOnly) Invoke(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, error) {
	return u.s.Invoke(ctx, req)
}

// servedPlugin serves srv over gRPC on a Unix socket and returns a Plugin
// whose instance calls it with a session, as a started process would.
func servedPlugin(t *testing.T, srv pb.DriverServer) (*Plugin, *instance) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterDriverServer(g, srv)
	go g.Serve(ln)
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPlugin(pb.NewDriverClient(conn))
	inst := p.cur
	if inst.session, err = openSession(inst.rpc, &p.host.wg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		inst.session.close()
		p.host.wg.Wait()
		conn.Close()
		g.Stop()
	})
	return p, inst
}

func fakeServer(t *testing.T) *server {
	t.Helper()
	s, err := newServer(ServeConfig{Name: "x", Bundle: builtin.Bundle(fake.Config{})}, HostProtocolVersions())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func powerOf(p *Plugin) driver.PowerInterface {
	return powerProxy{&proxy{plugin: p, kind: driver.KindPower, name: fake.Name}}
}

func powerTask() *driver.Task {
	return &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{}, DriverInternalInfo: map[string]any{fake.PowerStateKey: string(driver.PowerOn)}}
}

// TestSessionFallsBackToUnary checks that a plugin serving no Session (one
// built before it existed) gets its calls as unary Invoke.
func TestSessionFallsBackToUnary(t *testing.T) {
	p, inst := servedPlugin(t, unaryOnly{s: fakeServer(t)})
	for range 2 {
		st, err := powerOf(p).GetPowerState(context.Background(), powerTask())
		if err != nil || st != driver.PowerOn {
			t.Fatalf("GetPowerState = %q, %v", st, err)
		}
	}
	if !inst.unary.Load() {
		t.Error("the instance still uses its session after UNIMPLEMENTED")
	}
}

// TestSessionCarriesConcurrentCallsAndCancellation runs concurrent calls
// on one session, each getting its own reply, and checks that a call
// whose context ends returns at once with the context's error while the
// session keeps serving.
func TestSessionCarriesConcurrentCallsAndCancellation(t *testing.T) {
	p, inst := servedPlugin(t, fakeServer(t))
	pw := powerOf(p)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := powerTask()
			want := driver.PowerOn
			if i%2 == 1 {
				want = driver.PowerOff
				task.DriverInternalInfo[fake.PowerStateKey] = string(want)
			}
			if st, err := pw.GetPowerState(context.Background(), task); err != nil || st != want {
				errs <- errors.Join(err, errors.New("got "+string(st)+", want "+string(want)))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	slow := powerTask()
	slow.DriverInfo[fake.DelayKey] = "10s"
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		ctx, cancel := tc.ctx()
		start := time.Now()
		_, err := pw.GetPowerState(ctx, slow)
		cancel()
		if !errors.Is(err, tc.want) || time.Since(start) > 5*time.Second {
			t.Errorf("%s: slow call = %v after %v, want %v at once", tc.name, err, time.Since(start), tc.want)
		}
	}
	if st, err := pw.GetPowerState(context.Background(), powerTask()); err != nil || st != driver.PowerOn {
		t.Fatalf("after the cancelled calls: GetPowerState = %q, %v", st, err)
	}
	if inst.unary.Load() {
		t.Error("the calls went unary")
	}
	inst.session.mu.Lock()
	pending := len(inst.session.pending)
	inst.session.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d calls still pending", pending)
	}
}
