package ipmisol_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// BenchmarkLatency measures keystroke-to-echo latency through the whole
// path: a client writes one byte, the Manager's pty, ipmitool sol
// activate, ipmi_sim's SOL, the Machine (which echoes it) and back. One
// sample per iteration; run with -benchtime=300x for 300 samples. It
// reports the p50 and p99 in microseconds, raw TCP and WebSocket.
//
// DirectPTY is the baseline: the same ipmitool under a pseudo-terminal
// the benchmark holds itself, without the console package.
func BenchmarkLatency(b *testing.B) {
	r := newRig(b, console.Options{})
	r.machine.SetEcho(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	measure := func(b *testing.B, send func([]byte) error, recv func() ([]byte, error)) {
		// Warm up: keys typed just after the banner may be lost (see
		// typeUntilReceived); the echo of '#' proves the path is open.
		typeUntilReceived(ctx, b, r.machine, send, "#")
		for got := []byte{}; !slices.Contains(got, '#'); {
			p, err := recv()
			if err != nil {
				b.Fatal(err)
			}
			got = append(got, p...)
		}
		samples := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			key := byte('a' + i%26)
			start := time.Now()
			if err := send([]byte{key}); err != nil {
				b.Fatal(err)
			}
			for got := []byte{}; !slices.Contains(got, key); {
				p, err := recv()
				if err != nil {
					b.Fatal(err)
				}
				got = append(got, p...)
			}
			samples = append(samples, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(samples)
		p50 := samples[len(samples)*50/100]
		p99 := samples[min(len(samples)-1, len(samples)*99/100)]
		b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		b.ReportMetric(0, "ns/op")
		fmt.Printf("%s: %d samples p50 %s p99 %s max %s\n", b.Name(), len(samples), p50.Round(time.Microsecond), p99.Round(time.Microsecond), samples[len(samples)-1].Round(time.Microsecond))
	}

	info := r.start(b)
	b.Run("TCP", func(b *testing.B) {
		conn, err := net.Dial("tcp", info.Addr)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		buf := make([]byte, 256)
		measure(b, func(p []byte) error { _, err := conn.Write(p); return err }, func() ([]byte, error) {
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := conn.Read(buf)
			if err == io.EOF && n > 0 {
				err = nil
			}
			return buf[:n], err
		})
	})

	b.Run("WebSocket", func(b *testing.B) {
		mux := http.NewServeMux()
		mux.Handle("/console/", http.StripPrefix("/console/", r.m.Handler()))
		srv := httptest.NewServer(mux)
		defer srv.Close()
		var ws *websocket.Conn
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if ws, err = dialWS(ctx, srv, r.m, console.ReadWrite); err == nil || time.Now().After(deadline) {
				break // the TCP client's detach may lag its close
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		measure(b, func(p []byte) error { return ws.Write(ctx, websocket.MessageBinary, p) }, func() ([]byte, error) {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, data, err := ws.Read(rctx)
			return data, err
		})
	})
	// The baseline runs last, once the console has let the BMC's one
	// SOL session go: run first, its session handover made the
	// console's first keys vanish.
	if err := r.c.StopConsole(ctx, r.task); err != nil {
		b.Fatal(err)
	}
	b.Run("DirectPTY", func(b *testing.B) {
		info, err := ipmitool.ParseInfo(driver.ReadDriverInfo(r.task, driver.KindConsole, ipmisol.Name))
		if err != nil {
			b.Fatal(err)
		}
		cl, err := ipmitool.New(info, ipmitool.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sol, err := cl.SOL(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, sol.Activate.Path, sol.Activate.Args...)
		cmd.Env = sol.Activate.Env
		ptmx, err := pty.Start(cmd)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { // end the session, so the next run (and the console) can open one
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = ptmx.Close()
			deact := exec.CommandContext(ctx, sol.Deactivate.Path, sol.Deactivate.Args...)
			deact.Env = sol.Deactivate.Env
			_ = deact.Run()
		}()
		readUntil(b, ptmx, ipmitool.SOLReady, 15*time.Second)
		buf := make([]byte, 256)
		measure(b, func(p []byte) error { _, err := ptmx.Write(p); return err }, func() ([]byte, error) {
			n, err := ptmx.Read(buf)
			return buf[:n], err
		})
	})

}
