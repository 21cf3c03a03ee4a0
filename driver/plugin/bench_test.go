package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/internal/procstat"
)

// BenchmarkPowerStateRead measures one GetPowerState of the fake power
// implementation in process and through a real plugin process, and the
// floor under the plugin call in the same run: a bare gRPC unary call
// carrying the same request and response bytes to another process over a
// Unix socket, with gRPC's defaults in plaintext and with mutual TLS as
// go-plugin's AutoMTLS sets it up, and the same bytes as one call of a
// bare Session stream with the plugin transport's options, in plaintext
// as the plugin call on Linux (see "Transport security" in the package
// documentation), the floor of what it does, and with mutual TLS. Each reports the p50 and p99
// latency of the individual calls and the CPU time per call of both
// processes.
func BenchmarkPowerStateRead(b *testing.B) {
	ctx := context.Background()
	task := &driver.Task{NodeUUID: nodeUUID, HardwareType: builtin.FakeHardware,
		DriverInfo:         map[string]any{"ipmi_address": "10.0.0.1", "ipmi_username": "admin", "ipmi_password": "secret"},
		DriverInternalInfo: map[string]any{fake.PowerStateKey: string(driver.PowerOn)}}

	b.Run("in-process", func(b *testing.B) {
		latencies(b, 0, func() error {
			_, err := fake.NewPower(fake.Config{}).GetPowerState(ctx, task)
			return err
		})
	})
	bare := func(withTLS, session bool) func(*testing.B) {
		return func(b *testing.B) {
			s := startBareGRPC(b, withTLS, session)
			req := bareRequest(b, task)
			invoke := func() (*pb.InvokeResponse, error) { return s.client.Invoke(ctx, req) }
			if session {
				stream, err := s.client.Session(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var id uint64
				invoke = func() (*pb.InvokeResponse, error) {
					id++
					if err := stream.Send(&pb.SessionCall{Id: id, Request: req}); err != nil {
						return nil, err
					}
					r, err := stream.Recv()
					if err != nil {
						return nil, err
					}
					return r.Response, nil
				}
			}
			call := func() error {
				resp, err := invoke()
				if err == nil && string(resp.ResultJson) != `"power on"` {
					err = fmt.Errorf("bare gRPC server answered %q", resp.ResultJson)
				}
				return err
			}
			for range 100 { // warm the connection
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			latencies(b, s.cmd.Process.Pid, call)
		}
	}
	b.Run("grpc-unix", bare(false, false))
	b.Run("grpc-unix-mtls", bare(true, false))
	b.Run("grpc-unix-session", bare(false, true))
	b.Run("grpc-unix-session-mtls", bare(true, true))
	b.Run("plugin", func(b *testing.B) {
		host := plugin.NewHost(plugin.HostConfig{Dirs: []string{pluginDir(b, map[string]string{"anvil-driver-fake": bins.fake})}})
		defer host.Close()
		if _, err := host.Discover(ctx); err != nil {
			b.Fatal(err)
		}
		reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
		if err := host.Register(reg); err != nil {
			b.Fatal(err)
		}
		power, ok := reg.Interface(driver.KindPower, fake.Name)
		if !ok {
			b.Fatal("no fake power from the plugin")
		}
		p := power.(driver.PowerInterface)
		for range 100 { // warm the connection
			if _, err := p.GetPowerState(ctx, task); err != nil {
				b.Fatal(err)
			}
		}
		latencies(b, host.Plugins()[0].Status().PID, func() error {
			_, err := p.GetPowerState(ctx, task)
			return err
		})
	})
}

// bareRequest returns the InvokeRequest a power proxy sends for task, the
// payload of the bare gRPC baseline.
func bareRequest(b *testing.B, task *driver.Task) *pb.InvokeRequest {
	info, err := json.Marshal(task.DriverInfo)
	if err != nil {
		b.Fatal(err)
	}
	internal, err := json.Marshal(task.DriverInternalInfo)
	if err != nil {
		b.Fatal(err)
	}
	return &pb.InvokeRequest{Kind: string(driver.KindPower), Implementation: fake.Name, Operation: "get_power_state",
		Task: &pb.Task{NodeUuid: task.NodeUUID, HardwareType: task.HardwareType, DriverInfoJson: info, DriverInternalInfoJson: internal}}
}

// latencies runs op b.N times and reports p50 and p99 in microseconds,
// and the CPU time per call (user+system, a figure that depends less on
// how loaded the machine is than wall-clock latency) of this process and,
// when peer is not 0, of the process peer serving the calls.
func latencies(b *testing.B, peer int, op func() error) {
	d := make([]time.Duration, 0, b.N)
	cpuStart, peerStart := procstat.SelfCPU(), peerCPU(peer)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64((procstat.SelfCPU()-cpuStart).Nanoseconds())/1e3/float64(b.N), "host-cpu-µs/op")
	if peer != 0 {
		b.ReportMetric(float64((peerCPU(peer)-peerStart).Nanoseconds())/1e3/float64(b.N), "peer-cpu-µs/op")
	}
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(float64(len(d))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkDiscoverDescribe10 measures discovering, starting and
// describing 10 plugin executables, as a host does at start.
func BenchmarkDiscoverDescribe10(b *testing.B) {
	files := map[string]string{}
	for i := range 10 {
		files[fmt.Sprintf("anvil-driver-fake%02d", i)] = bins.fake
	}
	dir := pluginDir(b, files)
	var total time.Duration
	for range b.N {
		host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir}})
		start := time.Now()
		rep, err := host.Discover(context.Background())
		took := time.Since(start)
		b.StopTimer()
		host.Close()
		b.StartTimer()
		if err != nil || len(rep.Plugins) != 10 {
			b.Fatalf("Discover: %d plugins, %v, skipped %v", len(rep.Plugins), err, rep.Err())
		}
		total += took
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/discover")
}

// peerCPU is the CPU time the peer process has used (0 when gone).
func peerCPU(pid int) time.Duration {
	st, _ := procstat.Read(pid)
	return st.CPU
}
