package tftp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The throughput benchmark runs every party in a network namespace it
// creates, as a process of its own: Anvil's server (this test binary in
// the benchRole "server"), dnsmasq (whose TFTP listens on port 69 only,
// so it needs a namespace of its own to stay off the host's), and the
// client (this binary in the role "client": Get with blksize 1468 and
// windowsize 16, which dnsmasq 2.90 does not grant, so it runs lock-step
// there; "anvil-lockstep" asks Anvil for no window, like for like). The
// client times its own transfers, so process start-up is not measured;
// the "window" metric is the window the server granted.
//
//	go test -run '^$' -bench TFTPThroughput -benchtime 3x ./netboot/tftp
const (
	benchRole = "ANVIL_TFTP_BENCH_ROLE"
	benchArgs = "ANVIL_TFTP_BENCH_ARGS"
	benchSize = 50 << 20
)

// benchmarkRole runs this binary as a benchmark party when benchRole is
// set, and reports whether it did.
func benchmarkRole() bool {
	role := os.Getenv(benchRole)
	if role == "" {
		return false
	}
	var err error
	switch role {
	case "server":
		err = benchServer(os.Getenv(benchArgs))
	case "client":
		err = benchClient(os.Getenv(benchArgs))
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench", role+":", err)
		os.Exit(1)
	}
	return true
}

// benchServer serves the directory root on 127.0.0.1:6969 until SIGTERM.
func benchServer(root string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	conn, err := net.ListenPacket("udp", "127.0.0.1:6969")
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Println("ready")
	s := &Server{Handler: DirHandler(root), MaxTransfers: 100, Logger: slog.New(slog.DiscardHandler)}
	return s.Serve(ctx, conn)
}

// benchResult is what a client run prints.
type benchResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Window  int     `json:"window"`
}

// benchClient runs "addr file n window": n transfers at once asking for
// blksize 1468 and windowsize window, and prints a benchResult.
func benchClient(args string) error {
	f := strings.Fields(args)
	if len(f) != 4 {
		return fmt.Errorf("args %q, want addr file n window", args)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return err
	}
	window, err := strconv.Atoi(f[3])
	if err != nil {
		return err
	}
	o := ClientOptions{BlockSize: 1468, WindowSize: window, Timeout: 2 * time.Second}
	var mu sync.Mutex
	var res benchResult
	var errs []error
	var wg sync.WaitGroup
	began := time.Now()
	for range n {
		wg.Go(func() {
			r, err := Get(context.Background(), f[0], f[1], o, io.Discard)
			mu.Lock()
			defer mu.Unlock()
			res.Bytes += r.Bytes
			res.Window = r.WindowSize
			if err == nil && r.Bytes != benchSize {
				err = fmt.Errorf("got %d bytes, want %d", r.Bytes, benchSize)
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(began).Seconds()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d transfers failed, first: %w", len(errs), n, errs[0])
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// benchNetns creates a network namespace with lo up, removed at cleanup.
func benchNetns(b *testing.B) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("tftp benchmark: needs root for a network namespace")
	}
	for _, bin := range []string{"ip", "dnsmasq"} {
		if _, err := exec.LookPath(bin); err != nil {
			b.Skipf("tftp benchmark: %s not installed (Debian iproute2, dnsmasq-base)", bin)
		}
	}
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	ns := "anvil-tftp-" + hex.EncodeToString(rnd)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		b.Skipf("tftp benchmark: ip netns add: %v: %s", err, out)
	}
	b.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			b.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		b.Fatalf("lo up: %v: %s", err, out)
	}
	return ns
}

// benchDaemon starts argv inside ns and waits until its output has a
// line containing ready; it is stopped by its PID at cleanup.
func benchDaemon(b *testing.B, ns, ready string, env []string, argv ...string) {
	b.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pw.Close()
	b.Cleanup(func() {
		// ip netns exec execs argv: the PID is the daemon's own.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		pr.Close()
	})
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), ready) {
				ok = true
				found <- true
			}
		}
		if !ok {
			found <- false
		}
	}()
	select {
	case ok := <-found:
		if !ok {
			b.Fatalf("%s exited before saying %q", argv[0], ready)
		}
	case <-time.After(10 * time.Second):
		b.Fatalf("%s did not say %q within 10 s", argv[0], ready)
	}
}

func BenchmarkTFTPThroughput(b *testing.B) {
	ns := benchNetns(b)
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "ramdisk"), pattern(benchSize, 9), 0o644); err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	benchDaemon(b, ns, "ready", []string{benchRole + "=server", benchArgs + "=" + root}, exe)
	benchDaemon(b, ns, "TFTP root is", nil, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		"--port=0", "--enable-tftp", "--tftp-root="+root, "--listen-address=127.0.0.1", "--bind-interfaces",
		"--tftp-max=100", "--user=root", "--pid-file=", "--log-facility=-", "--quiet-tftp")
	servers := []struct {
		name, addr string
		window     int
	}{
		{"anvil", "127.0.0.1:6969", 16},
		{"anvil-lockstep", "127.0.0.1:6969", 1},
		{"dnsmasq", "127.0.0.1:69", 16},
	}
	for _, s := range servers {
		for _, n := range []int{1, 50} {
			b.Run(fmt.Sprintf("%s-%d", s.name, n), func(b *testing.B) {
				var total benchResult
				for b.Loop() {
					cmd := exec.Command("ip", "netns", "exec", ns, exe)
					cmd.Env = append(os.Environ(), benchRole+"=client",
						fmt.Sprintf("%s=%s ramdisk %d %d", benchArgs, s.addr, n, s.window))
					out, err := cmd.Output()
					if err != nil {
						var stderr []byte
						if ee, ok := err.(*exec.ExitError); ok {
							stderr = ee.Stderr
						}
						b.Fatalf("client: %v: %s", err, stderr)
					}
					var r benchResult
					if err := json.Unmarshal(out, &r); err != nil {
						b.Fatalf("client output %q: %v", out, err)
					}
					total.Bytes += r.Bytes
					total.Seconds += r.Seconds
					total.Window = r.Window
				}
				b.ReportMetric(float64(total.Bytes)/(1<<20)/total.Seconds, "MiB/s")
				b.ReportMetric(float64(total.Window), "window")
			})
		}
	}
}

// BenchmarkGet is the in-process round trip on 127.0.0.1 (server and
// client in one process, no root needed), for profiling.
func BenchmarkGet(b *testing.B) {
	data := pattern(8<<20, 3)
	st := start(b, &Server{Handler: newMemFS(map[string][]byte{"f": data}), Logger: slog.New(slog.DiscardHandler)})
	for _, o := range []struct {
		name string
		o    ClientOptions
	}{
		{"lockstep", ClientOptions{BlockSize: 1468}},
		{"window16", ClientOptions{BlockSize: 1468, WindowSize: 16}},
	} {
		b.Run(o.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if r, err := Get(context.Background(), st.addr, "f", o.o, io.Discard); err != nil || r.Bytes != int64(len(data)) {
					b.Fatalf("Get: %v, %d bytes", err, r.Bytes)
				}
			}
		})
	}
}
