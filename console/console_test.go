//go:build linux

package console_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/internal/testlog"

	"github.com/anvilmetal/anvil/console"
)

const wait = 10 * time.Second

// newManager returns a Manager closed when the test ends, logging into a
// buffer the test can search for secrets.
func newManager(t *testing.T, opts console.Options) (*console.Manager, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.KillTimeout == 0 {
		opts.KillTimeout = 300 * time.Millisecond
	}
	m := console.NewManager(opts)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m, logs
}

func start(t *testing.T, m *console.Manager, spec console.Spec) console.Info {
	t.Helper()
	info, err := m.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return info
}

func dial(t *testing.T, info console.Info) (net.Conn, *reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", info.Addr, wait)
	if err != nil {
		t.Fatalf("dial %s: %v", info.Addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, collect(conn)
}

func TestTCPConsoleReachesTheMachine(t *testing.T) {
	m, _ := newManager(t, console.Options{})
	info := start(t, m, console.Spec{NodeUUID: "node-1", Command: helper("machine")})
	if info.PID <= 0 || !strings.HasPrefix(info.URL(), "tcp://127.0.0.1:") || info.StartedAt.IsZero() {
		t.Fatalf("Info = %+v, URL %s", info, info.URL())
	}
	if got, ok := m.Info("node-1"); !ok || got != info {
		t.Fatalf("Info(node-1) = %+v, %v; want %+v", got, ok, info)
	}
	if out := waitTranscript(m, "node-1", "machine> ", wait); !strings.Contains(out, "ANVIL MACHINE pid "+strconv.Itoa(info.PID)) {
		t.Fatalf("banner missing from transcript %q", out)
	}

	viewer, err := m.Attach(context.Background(), "node-1", console.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close()
	seen := collect(viewer)

	conn, got := dial(t, info)
	if _, err := io.WriteString(conn, "hello tcp\r"); err != nil {
		t.Fatal(err)
	}
	got.waitFor(t, "machine got: HELLO TCP", wait)
	seen.waitFor(t, "machine got: HELLO TCP", wait)

	// A second TCP client is refused with one line: the first holds the
	// keyboard, as with socat's max-children=1.
	_, second := dial(t, info)
	if err := second.waitEnd(t, wait); err != io.EOF {
		t.Fatalf("second client ended with %v, want EOF", err)
	}
	if s := second.String(); s != console.ErrWriterBusy.Error()+"\r\n" {
		t.Fatalf("second client got %q", s)
	}
	// So is a ReadWrite Attach.
	if _, err := m.Attach(context.Background(), "node-1", console.ReadWrite); !errors.Is(err, console.ErrWriterBusy) {
		t.Fatalf("Attach ReadWrite with a TCP client: %v, want ErrWriterBusy", err)
	}
	if _, err := viewer.Write([]byte("x")); !errors.Is(err, console.ErrReadOnly) {
		t.Fatalf("read-only Write: %v, want ErrReadOnly", err)
	}

	in := inputOf(m, "node-1")
	if !strings.Contains(in, "hello tcp\r") {
		t.Fatalf("input transcript %q lacks the typed line", in)
	}

	// Once the TCP client leaves, the keyboard is free.
	conn.Close()
	deadline := time.Now().Add(wait)
	for {
		w, err := m.Attach(context.Background(), "node-1", console.ReadWrite)
		if err == nil {
			w.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keyboard still busy after the TCP client left: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAttachFanOutAndStop(t *testing.T) {
	m, _ := newManager(t, console.Options{})
	start(t, m, console.Spec{NodeUUID: "node-2", Command: helper("machine")})
	waitTranscript(m, "node-2", "machine> ", wait)
	w, err := m.Attach(context.Background(), "node-2", console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	var viewers []*reader
	for range 3 {
		v, err := m.Attach(context.Background(), "node-2", console.ReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		viewers = append(viewers, collect(v))
	}
	wr := collect(w)
	if _, err := w.Write([]byte("fan out\r")); err != nil {
		t.Fatal(err)
	}
	for _, v := range append(viewers, wr) {
		v.waitFor(t, "machine got: FAN OUT", wait)
	}
	if err := m.Stop(context.Background(), "node-2"); err != nil {
		t.Fatal(err)
	}
	for _, v := range append(viewers, wr) {
		if err := v.waitEnd(t, wait); err != io.EOF {
			t.Fatalf("client after Stop: %v, want EOF", err)
		}
	}
	if _, ok := m.Info("node-2"); ok {
		t.Fatal("Info reports a stopped console")
	}
	if _, err := m.Attach(context.Background(), "node-2", console.ReadOnly); !errors.Is(err, console.ErrNoSession) {
		t.Fatalf("Attach after Stop: %v, want ErrNoSession", err)
	}
	// The transcript outlives the session, holding both directions.
	chunks, err := m.Transcript("node-2")
	if err != nil {
		t.Fatal(err)
	}
	var in, out bool
	for _, c := range chunks {
		in = in || (c.Input && strings.Contains(string(c.Data), "fan out"))
		out = out || (!c.Input && strings.Contains(string(c.Data), "FAN OUT"))
	}
	if !in || !out {
		t.Fatalf("transcript after Stop lacks input (%v) or output (%v): %+v", in, out, chunks)
	}
	if err := m.Stop(context.Background(), "node-2"); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := m.Transcript("never-started"); !errors.Is(err, console.ErrNoSession) {
		t.Fatalf("Transcript of an unknown node: %v", err)
	}
}

func TestStartReplacesTheRunningConsole(t *testing.T) {
	m, _ := newManager(t, console.Options{})
	first := start(t, m, console.Spec{NodeUUID: "node-3", Command: helper("machine")})
	old, err := m.Attach(context.Background(), "node-3", console.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	oldr := collect(old)
	second := start(t, m, console.Spec{NodeUUID: "node-3", Command: helper("machine"), Port: portOf(t, first)})
	if second.PID == first.PID || second.Addr != first.Addr {
		t.Fatalf("second Start: %+v, first %+v: want a new program on the same port", second, first)
	}
	waitGone(t, "replaced console program", first.PID, wait)
	if err := oldr.waitEnd(t, wait); err != io.EOF {
		t.Fatalf("client of the replaced console: %v, want EOF", err)
	}
}

func portOf(t *testing.T, info console.Info) int {
	_, p, err := net.SplitHostPort(info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestRestartAfterExitRunsBeforeEachTime(t *testing.T) {
	dir := t.TempDir()
	beforeFile := filepath.Join(dir, "before")
	m, _ := newManager(t, console.Options{})
	before := helper("before", "BEFORE_FILE="+beforeFile)
	info := start(t, m, console.Spec{NodeUUID: "node-4", Command: helper("machine"), Before: &before})
	if n := countLines(t, beforeFile); n != 1 {
		t.Fatalf("Before ran %d times before the first start, want 1", n)
	}
	w, err := m.Attach(context.Background(), "node-4", console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := collect(w)
	waitTranscript(m, "node-4", "machine> ", wait)
	if _, err := w.Write([]byte("exit\r")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "exited console program", info.PID, wait)
	// The program comes back after the first backoff (1 s); the client
	// stays attached across the restart and sees the new banner.
	var now console.Info
	deadline := time.Now().Add(wait)
	for {
		var ok bool
		now, ok = m.Info("node-4")
		if !ok {
			t.Fatal("console not running after its program exited")
		}
		if now.PID != 0 && now.PID != info.PID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("program not restarted: Info = %+v, first PID %d", now, info.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.waitFor(t, "ANVIL MACHINE pid "+strconv.Itoa(now.PID), wait)
	if n := countLines(t, beforeFile); n != 2 {
		t.Fatalf("Before ran %d times for two starts", n)
	}
	if _, err := w.Write([]byte("again\r")); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "machine got: AGAIN", wait)
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestReadyText(t *testing.T) {
	m, _ := newManager(t, console.Options{SubprocessTimeout: wait})
	cmd := helper("machine", "MACHINE_READY=[SOL Session operational.  Use ~? for help]")
	began := time.Now()
	start(t, m, console.Spec{NodeUUID: "node-5", Command: cmd, Ready: "[SOL Session operational"})
	// How long the helper takes, on this machine now, to start and print
	// its banner and then the ready text: the baseline of the timeout
	// below, which must let the banner through (a fixed 500 ms did not
	// on a loaded machine, where starting the helper took longer).
	baseline := time.Since(began)
	if out := outputOf(m, "node-5"); !strings.Contains(out, "[SOL Session operational") {
		t.Fatalf("Start returned before the ready text: %q", out)
	}

	m2, _ := newManager(t, console.Options{SubprocessTimeout: max(500*time.Millisecond, 3*baseline)})
	_, err := m2.Start(context.Background(), console.Spec{NodeUUID: "node-5b", Command: helper("machine"), Ready: "never printed"})
	var se *console.StartError
	if !errors.As(err, &se) || !strings.Contains(se.Output, "ANVIL MACHINE") || !strings.Contains(err.Error(), `"never printed"`) {
		t.Fatalf("Start without the ready text: %v", err)
	}
}

func TestSecretsScrubbed(t *testing.T) {
	const secret = "hunter2-Sup3rS3cret"
	tests := []struct {
		name string
		spec func(before *console.Command) console.Spec
	}{
		{"program fails at start", func(*console.Command) console.Spec {
			return console.Spec{Command: helper("fail", "MACHINE_SECRET="+secret), Ready: "[SOL Session operational"}
		}},
		{"program prints it", func(*console.Command) console.Spec {
			return console.Spec{Command: helper("machine", "MACHINE_SECRET="+secret)}
		}},
		{"Before fails printing it", func(b *console.Command) console.Spec {
			return console.Spec{Command: helper("machine"), Before: b}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			m, logs := newManager(t, console.Options{TranscriptDir: dir})
			b := helper("before", "BEFORE_FILE="+filepath.Join(dir, "b"), "BEFORE_FAIL=1", "MACHINE_SECRET="+secret)
			spec := tt.spec(&b)
			spec.NodeUUID = "node-secret-" + strconv.Itoa(i)
			spec.Secrets = []string{secret}
			_, err := m.Start(context.Background(), spec)
			if i == 0 {
				var se *console.StartError
				if !errors.As(err, &se) || se.Program != filepath.Base(os.Args[0]) || !strings.Contains(se.Output, "unable to establish session with password ***") {
					t.Fatalf("Start: %v, want a StartError with the scrubbed output", err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("StartError holds the secret: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else {
				waitTranscript(m, spec.NodeUUID, "machine> ", wait)
			}
			if i == 1 {
				w, err := m.Attach(context.Background(), spec.NodeUUID, console.ReadWrite)
				if err != nil {
					t.Fatal(err)
				}
				r := collect(w)
				// Typed one byte at a time, as a browser sends keys: the
				// secret is split across chunks both ways. The secret is
				// typed once the machine has answered "secret": typed
				// earlier, the terminal's echo of it interleaves with the
				// machine's answer (an echoed "hunter2-Sup3rS3cre" and
				// the answer's "t" form the secret, rightly scrubbed,
				// and "the password is ***" never appears).
				typed := func(text string) {
					for _, k := range text {
						if _, err := w.Write([]byte(string(k))); err != nil {
							t.Fatal(err)
						}
					}
				}
				typed("secret\r")
				r.waitFor(t, "the password is ***", wait)
				typed(secret + "\r")
				r.waitFor(t, "machine got: "+strings.ToUpper(secret), wait)
				if strings.Contains(r.String(), secret) {
					t.Fatalf("a client saw the secret: %q", r.String())
				}
				w.Close()
			}
			if i == 2 {
				deadline := time.Now().Add(wait)
				for !strings.Contains(logs.String(), "pre-start command failed") && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if !strings.Contains(logs.String(), "before failed with ***") {
					t.Fatalf("Before's failure not logged with scrubbed output: %s", logs.String())
				}
			}
			if err := m.Stop(context.Background(), spec.NodeUUID); err != nil {
				t.Fatal(err)
			}
			chunks, err := m.Transcript(spec.NodeUUID)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range chunks {
				if strings.Contains(string(c.Data), secret) {
					t.Fatalf("transcript chunk holds the secret: %q", c.Data)
				}
			}
			file, err := os.ReadFile(filepath.Join(dir, spec.NodeUUID+".log"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(file), secret) || len(file) == 0 {
				t.Fatalf("transcript file (%d bytes) holds the secret or nothing: %s", len(file), file)
			}
			if st, err := os.Stat(filepath.Join(dir, spec.NodeUUID+".log")); err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("transcript file mode: %v, %v", st.Mode(), err)
			}
			if strings.Contains(logs.String(), secret) {
				t.Fatalf("logs hold the secret: %s", logs.String())
			}
		})
	}
}

func TestIdleTimeoutClosesTheClientNotTheConsole(t *testing.T) {
	clk := newManualClock()
	m, _ := newManager(t, console.Options{Clock: clk, IdleTimeout: time.Minute})
	info := start(t, m, console.Spec{NodeUUID: "node-6", Command: helper("machine"), IdleTimeout: 30 * time.Second})
	waitTranscript(m, "node-6", "machine> ", wait)
	conn, r := dial(t, info)
	waitWaiters(t, clk, 1)
	clk.Advance(20 * time.Second)
	// A keystroke is activity: the client survives the first deadline.
	if _, err := io.WriteString(conn, "ping\r"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "machine got: PING", wait)
	clk.Advance(15 * time.Second)
	waitWaiters(t, clk, 1)
	select {
	case <-r.done:
		t.Fatal("client closed although it was active 15 s ago")
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(30 * time.Second)
	if err := r.waitEnd(t, wait); err != io.EOF {
		t.Fatalf("idle TCP client ended with %v", err)
	}
	if now, ok := m.Info("node-6"); !ok || now.PID != info.PID {
		t.Fatalf("the console did not keep running: %+v, %v", now, ok)
	}
	// An attached client gets ErrIdleTimeout.
	c, err := m.Attach(context.Background(), "node-6", console.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	cr := collect(c)
	waitWaiters(t, clk, 1)
	clk.Advance(31 * time.Second)
	if err := cr.waitEnd(t, wait); !errors.Is(err, console.ErrIdleTimeout) {
		t.Fatalf("idle client: %v, want ErrIdleTimeout", err)
	}
}

func waitWaiters(t *testing.T, clk *storetest.ManualClock, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d clock waiters, want %d", clk.Waiters(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSlowClientIsClosed(t *testing.T) {
	m, _ := newManager(t, console.Options{})
	start(t, m, console.Spec{NodeUUID: "node-7", Command: helper("machine")})
	waitTranscript(m, "node-7", "machine> ", wait)
	w, err := m.Attach(context.Background(), "node-7", console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	wr := collect(w)
	slow, err := m.Attach(context.Background(), "node-7", console.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	// slow is never read; flood the console until it is dropped.
	line := strings.Repeat("y", 1000) + "\r"
	var lastErr error
	for i := 0; i < 1000; i++ {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if _, lastErr = slow.Read(make([]byte, 0)); lastErr != nil {
			break
		}
		if strings.Count(outputOf(m, "node-7"), "machine got") > 300 {
			break
		}
	}
	deadline := time.Now().Add(wait)
	for {
		_, err := slow.Read(make([]byte, 1))
		if errors.Is(err, console.ErrClientTooSlow) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow client not closed: %v", err)
		}
	}
	// The writer, which reads, is still attached.
	if _, err := w.Write([]byte("still here\r")); err != nil {
		t.Fatal(err)
	}
	wr.waitFor(t, "machine got: STILL HERE", wait)
}

func TestTranscriptBounded(t *testing.T) {
	m, _ := newManager(t, console.Options{TranscriptBytes: 4096})
	start(t, m, console.Spec{NodeUUID: "node-8", Command: helper("machine")})
	w, err := m.Attach(context.Background(), "node-8", console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	r := collect(w)
	for i := range 40 {
		if _, err := w.Write([]byte("line " + strconv.Itoa(i) + " " + strings.Repeat("z", 200) + "\r")); err != nil {
			t.Fatal(err)
		}
	}
	r.waitFor(t, "machine got: LINE 39", wait)
	chunks, _ := m.Transcript("node-8")
	total := 0
	for _, c := range chunks {
		total += len(c.Data)
	}
	if total > 4096 || total == 0 {
		t.Fatalf("transcript holds %d bytes, bound 4096", total)
	}
	if out := outputOf(m, "node-8"); strings.Contains(out, "ANVIL MACHINE") || !strings.Contains(out, "LINE 39") {
		t.Fatalf("transcript did not drop the oldest output first: %q", out)
	}
}

func TestPorts(t *testing.T) {
	// Find three consecutive free ports to form a range.
	base := freePortRange(t, 2)
	m, _ := newManager(t, console.Options{PortRange: [2]int{base, base + 1}})
	a := start(t, m, console.Spec{NodeUUID: "p-a", Command: helper("machine")})
	b := start(t, m, console.Spec{NodeUUID: "p-b", Command: helper("machine")})
	if pa, pb := portOf(t, a), portOf(t, b); pa == pb || pa < base || pa > base+1 || pb < base || pb > base+1 {
		t.Fatalf("ports %d and %d, want both of %d:%d", pa, pb, base, base+1)
	}
	_, err := m.Start(context.Background(), console.Spec{NodeUUID: "p-c", Command: helper("machine")})
	if !errors.Is(err, console.ErrPortsExhausted) {
		t.Fatalf("third console in a range of two: %v, want ErrPortsExhausted", err)
	}
}

func freePortRange(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ok := base+n-1 <= 65535
		for p := base; ok && p < base+n; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name  string
		opts  console.Options
		spec  console.Spec
		field string
	}{
		{"no node", console.Options{}, console.Spec{Command: helper("machine")}, "Spec.NodeUUID"},
		{"no program", console.Options{}, console.Spec{NodeUUID: "n"}, "Spec.Command.Path"},
		{"bad port", console.Options{}, console.Spec{NodeUUID: "n", Command: helper("machine"), Port: 70000}, "Spec.Port"},
		{"empty Before", console.Options{}, console.Spec{NodeUUID: "n", Command: helper("machine"), Before: &console.Command{}}, "Spec.Before.Path"},
		{"reversed range", console.Options{PortRange: [2]int{20000, 10000}}, console.Spec{NodeUUID: "n", Command: helper("machine")}, "Options.PortRange"},
		{"bad address", console.Options{BindAddress: "not an address"}, console.Spec{NodeUUID: "n", Command: helper("machine")}, "Options.BindAddress"},
		{"node not a file name", console.Options{TranscriptDir: t.TempDir()}, console.Spec{NodeUUID: "../x", Command: helper("machine")}, "Spec.NodeUUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newManager(t, tt.opts)
			_, err := m.Start(context.Background(), tt.spec)
			var se *console.SpecError
			if !errors.As(err, &se) || se.Field != tt.field {
				t.Fatalf("Start: %v, want a SpecError for %s", err, tt.field)
			}
		})
	}
	m, _ := newManager(t, console.Options{})
	_, err := m.Start(context.Background(), console.Spec{NodeUUID: "n", Command: console.Command{Path: "/nonexistent/ipmitool"}})
	var se *console.StartError
	if !errors.As(err, &se) || se.NodeUUID != "n" || se.Program != "ipmitool" {
		t.Fatalf("Start of a missing program: %v", err)
	}
}

func TestCloseRefusesAndKillsTheGroup(t *testing.T) {
	m := console.NewManager(console.Options{KillTimeout: 200 * time.Millisecond})
	// stubborn ignores SIGTERM: Close must escalate to SIGKILL.
	info, err := m.Start(context.Background(), console.Spec{NodeUUID: "c-1", Command: helper("stubborn")})
	if err != nil {
		t.Fatal(err)
	}
	waitTranscript(m, "c-1", "machine> ", wait)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(info.PID) {
		t.Fatalf("console program %d alive after Close", info.PID)
	}
	if _, err := m.Start(context.Background(), console.Spec{NodeUUID: "c-2", Command: helper("machine")}); !errors.Is(err, console.ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
}

// TestNoOrphans runs a Manager in a child process whose console program
// spawns a grandchild. Killing the child with SIGKILL must take both
// with it (the parent-death signal, then the terminal's hangup); a Close
// must kill the whole process group.
func TestNoOrphans(t *testing.T) {
	for _, tt := range []struct {
		name  string
		close bool
	}{{"SIGKILL of the manager's process", false}, {"Close", true}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"=manager")
			if tt.close {
				cmd.Env = append(cmd.Env, "MANAGER_CLOSE=1")
			}
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}()
			sc := bufio.NewScanner(out)
			var consolePID, grandPID int
			lines := make(chan string)
			go func() {
				defer close(lines)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			select {
			case l := <-lines:
				f := strings.Fields(l)
				if len(f) != 3 || f[0] != "PIDS" {
					t.Fatalf("child said %q", l)
				}
				consolePID, _ = strconv.Atoi(f[1])
				grandPID, _ = strconv.Atoi(f[2])
			case <-testDeadline(t):
				t.Fatal("child did not report its console's PIDs before the test's deadline")
			}
			if !alive(consolePID) || !alive(grandPID) {
				t.Fatalf("console %d or grandchild %d not running", consolePID, grandPID)
			}
			// Starting three processes (the child, its console program
			// and the grandchild) took setup on this machine now; ending
			// them takes less. Bounds below are relative to it.
			setup := time.Since(t0)
			bound := 3 * setup
			if tt.close {
				if _, err := io.WriteString(in, "close\n"); err != nil {
					t.Fatal(err)
				}
				select {
				case l := <-lines:
					if l != "CLOSED" {
						t.Fatalf("child said %q", l)
					}
				case <-time.After(bound):
					t.Fatalf("Close did not return within %s (3 times the %s setup)", bound, setup)
				}
				// Close returned: the group is already gone.
				if alive(consolePID) || alive(grandPID) {
					t.Fatalf("after Close: console alive %v, grandchild alive %v", alive(consolePID), alive(grandPID))
				}
				return
			}
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitGone(t, "console program", consolePID, bound)
			waitGone(t, "grandchild", grandPID, bound)
		})
	}
}

// testDeadline fires at the test's deadline (-timeout), never without
// one: for waits on something that must happen, however slowly.
func testDeadline(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d))
}
