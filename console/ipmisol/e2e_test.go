package ipmisol_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/internal/testlog"
)

// password is the simulated BMC's password: distinctive, so that a test
// finds it wherever it leaks.
const password = "S0l-s3cret-pw"

// rig is one node's console against ipmi_sim: a Manager, the console
// interface, the simulated BMC and the machine behind its SOL device.
type rig struct {
	m       *console.Manager
	c       *ipmisol.Console
	bmc     *ipmisim.BMC
	machine *ipmisim.Machine
	task    *driver.Task
	logs    *testlog.Buffer
}

func newRig(tb testing.TB, opts console.Options) *rig {
	tb.Helper()
	ipmisim.Require(tb)
	machine := ipmisim.NewMachine(tb)
	bmc := ipmisim.Start(tb, ipmisim.Options{SOL: machine.Addr(), Password: password})
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Logger = logger
	m := console.NewManager(opts)
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Error(err)
		}
	})
	c := ipmisol.New(m, ipmisol.Options{Logger: logger})
	task := simTask(bmc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := machine.WaitConnected(ctx); err != nil {
		tb.Fatal(err)
	}
	return &rig{m: m, c: c, bmc: bmc, machine: machine, task: task, logs: logs}
}

// simTask is a node whose BMC is bmc.
func simTask(bmc *ipmisim.BMC) *driver.Task {
	return &driver.Task{NodeUUID: nodeUUID, HardwareType: "ipmi", DriverInfo: map[string]any{
		"ipmi_address": bmc.Addr, "ipmi_port": float64(bmc.Port), "ipmi_username": bmc.Username,
		"ipmi_password": bmc.Password, "ipmi_cipher_suite": "3", // ipmi_sim has suite 3 only
	}}
}

func (r *rig) start(tb testing.TB) console.Info {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.c.StartConsole(ctx, r.task); err != nil {
		tb.Fatal(err)
	}
	info, ok := r.m.Info(nodeUUID)
	if !ok {
		tb.Fatal("no console running after StartConsole")
	}
	return info
}

// readUntil reads from rd until the output holds want.
func readUntil(tb testing.TB, rd io.Reader, want string, timeout time.Duration) string {
	tb.Helper()
	type result struct {
		seen string
		err  error
	}
	done := make(chan result, 1)
	go func() { // ends when want is seen or rd fails (the caller closes it on timeout)
		var seen []byte
		buf := make([]byte, 4096)
		for {
			n, err := rd.Read(buf)
			seen = append(seen, buf[:n]...)
			if bytes.Contains(seen, []byte(want)) || err != nil {
				done <- result{string(seen), err}
				return
			}
		}
	}()
	select {
	case res := <-done:
		if !strings.Contains(res.seen, want) {
			tb.Fatalf("read %q, then %v; want %q", res.seen, res.err, want)
		}
		return res.seen
	case <-time.After(timeout):
		if c, ok := rd.(io.Closer); ok {
			_ = c.Close()
		}
		<-done
		tb.Fatalf("no %q within %s", want, timeout)
	}
	return ""
}

// wsReader adapts a WebSocket connection to io.Reader (binary messages).
type wsReader struct {
	ctx  context.Context
	conn *websocket.Conn
	rest []byte
}

func (w *wsReader) Read(p []byte) (int, error) {
	for len(w.rest) == 0 {
		_, data, err := w.conn.Read(w.ctx)
		if err != nil {
			return 0, err
		}
		w.rest = data
	}
	n := copy(p, w.rest)
	w.rest = w.rest[n:]
	return n, nil
}

func dialWS(ctx context.Context, srv *httptest.Server, m *console.Manager, mode console.Mode) (*websocket.Conn, error) {
	tok, err := m.IssueToken(nodeUUID, mode)
	if err != nil {
		return nil, err
	}
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/console/" + nodeUUID + "/ws?token=" + tok.Value
	conn, _, err := websocket.Dial(ctx, u, nil)
	return conn, err
}

// typeUntilReceived types text until the machine has it: ipmitool
// prints its "SOL Session operational" banner (which Start waits for)
// just before it puts its terminal in raw mode, and keys typed in between
// are cooked or flushed by the line discipline.
func typeUntilReceived(ctx context.Context, t testing.TB, machine *ipmisim.Machine, write func([]byte) error, text string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		if err := write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := machine.WaitTyped(wctx, text)
		cancel()
		if err == nil {
			return
		}
		if attempt == 10 {
			t.Fatalf("typing %q: %v; the machine has %q", text, err, machine.Typed())
		}
	}
}

// refusedWS checks that a read-write WebSocket opened while another
// client holds the keyboard is closed at once with the reason.
func refusedWS(ctx context.Context, t *testing.T, srv *httptest.Server, m *console.Manager, where string) {
	t.Helper()
	ws, err := dialWS(ctx, srv, m, console.ReadWrite)
	if err != nil {
		t.Fatalf("second writer %s: %v", where, err)
	}
	defer ws.CloseNow()
	_, data, err := ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "another client") {
		t.Fatalf("second writer %s: read %q, %v; want closed as a policy violation naming the other client", where, data, err)
	}
}

// ipmitoolPIDs returns the PIDs whose command line names ipmitool.
func ipmitoolPIDs(tb testing.TB) map[int]string {
	tb.Helper()
	out := map[int]string{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "ipmitool" {
			out[pid] = strings.Join(args, " ")
		}
	}
	return out
}

// alive reports whether pid is a process that has not been reaped
// (zombies count as gone: they no longer run).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// The whole path: StartConsole against ipmi_sim, typing and output over
// the raw TCP port and over the Manager's WebSocket, one writer at a
// time, the transcript, the password kept out of process arguments,
// transcripts and logs, and StopConsole leaving no ipmitool behind.
func TestConsoleAgainstSimulator(t *testing.T) {
	r := newRig(t, console.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info := r.start(t)

	// driver_internal_info records the address, so any conductor can
	// answer GetConsole.
	addr, _ := r.task.DriverInternalInfo[ipmisol.InternalAddress].(string)
	if addr != info.Addr || r.task.DriverInternalInfo[ipmisol.InternalAllocatedPort] == nil {
		t.Fatalf("driver_internal_info %v, console at %s", r.task.DriverInternalInfo, info.Addr)
	}
	ci, err := r.c.GetConsole(ctx, r.task)
	if err != nil || ci.Type != "socat" || ci.URL != "tcp://"+info.Addr {
		t.Fatalf("GetConsole = %+v, %v; want socat tcp://%s", ci, err, info.Addr)
	}
	// The password is in no process's arguments (the console and its
	// restarts alike).
	for pid, cmdline := range ipmitoolPIDs(t) {
		if strings.Contains(cmdline, password) {
			t.Fatalf("ipmitool %d has the password in its arguments: %s", pid, cmdline)
		}
	}
	if _, ok := ipmitoolPIDs(t)[info.PID]; !ok {
		t.Fatalf("the console's PID %d is not an ipmitool process (%v)", info.PID, ipmitoolPIDs(t))
	}

	// Raw TCP: typed bytes reach the machine, its output the client.
	tcp, err := net.Dial("tcp", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	typeUntilReceived(ctx, t, r.machine, func(p []byte) error { _, err := tcp.Write(p); return err }, "typed-over-tcp\r")
	if err := r.machine.Print(ctx, []byte("printed-for-tcp\r\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, tcp, "printed-for-tcp", 10*time.Second)

	// A second writer is refused while the TCP client holds the keyboard,
	// over TCP, by Attach and over the WebSocket.
	second, err := net.Dial("tcp", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	refusal := readUntil(t, second, console.ErrWriterBusy.Error(), 5*time.Second)
	_ = second.Close()
	if strings.Contains(refusal, "printed") {
		t.Fatalf("the refused client saw console output: %q", refusal)
	}
	if _, err := r.m.Attach(ctx, nodeUUID, console.ReadWrite); !errors.Is(err, console.ErrWriterBusy) {
		t.Fatalf("Attach ReadWrite beside the TCP client: %v, want ErrWriterBusy", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console/", r.m.Handler()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	refusedWS(ctx, t, srv, r.m, "beside the TCP client")
	_ = tcp.Close()

	// WebSocket: the same both ways, once the TCP client has gone.
	var ws *websocket.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		ws, err = dialWS(ctx, srv, r.m, console.ReadWrite)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the TCP client's detach may lag its close
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	typeUntilReceived(ctx, t, r.machine, func(p []byte) error { return ws.Write(ctx, websocket.MessageBinary, p) }, "typed-over-ws\r")
	// The machine echoes the password (as a careless BMC or a login
	// prompt might): it must not reach the transcript.
	if err := r.machine.Print(ctx, []byte("printed-for-ws "+password+"\r\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, &wsReader{ctx: ctx, conn: ws}, "printed-for-ws", 10*time.Second)
	refusedWS(ctx, t, srv, r.m, "beside the first WebSocket")

	// The transcript holds what was typed and what was printed, never
	// the password.
	chunks, err := r.m.Transcript(nodeUUID)
	if err != nil {
		t.Fatal(err)
	}
	var typed, printed strings.Builder
	for _, ch := range chunks {
		if bytes.Contains(ch.Data, []byte(password)) {
			t.Fatalf("transcript chunk with the password: %q", ch.Data)
		}
		if ch.Input {
			typed.Write(ch.Data)
		} else {
			printed.Write(ch.Data)
		}
	}
	for _, want := range []string{"typed-over-tcp", "typed-over-ws"} {
		if !strings.Contains(typed.String(), want) {
			t.Errorf("transcript input %q lacks %q", typed.String(), want)
		}
	}
	for _, want := range []string{"printed-for-tcp", "printed-for-ws"} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("transcript output %q lacks %q", printed.String(), want)
		}
	}

	// StopConsole: no ipmitool of the console left, the address gone.
	pid := info.PID
	if err := r.c.StopConsole(ctx, r.task); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("ipmitool %d still runs after StopConsole", pid)
	}
	for p, cmdline := range ipmitoolPIDs(t) {
		if strings.Contains(cmdline, "-p "+strconv.Itoa(r.bmc.Port)+" ") && alive(p) {
			t.Fatalf("ipmitool %d for this BMC still runs after StopConsole: %s", p, cmdline)
		}
	}
	if _, ok := r.task.DriverInternalInfo[ipmisol.InternalAddress]; ok {
		t.Fatalf("driver_internal_info keeps the address after StopConsole: %v", r.task.DriverInternalInfo)
	}
	if _, err := r.c.GetConsole(ctx, r.task); !errors.Is(err, console.ErrNoSession) {
		t.Fatalf("GetConsole after StopConsole: %v, want ErrNoSession", err)
	}
	if strings.Contains(r.logs.String(), password) {
		t.Fatalf("the password is in the log:\n%s", r.logs.String())
	}
}

// GetConsole answers on a conductor that does not run the console, from
// driver_internal_info, with Options.Host in place of the listener's.
func TestGetConsoleFromInternalInfo(t *testing.T) {
	m := console.NewManager(console.Options{})
	defer m.Close()
	c := ipmisol.New(m, ipmisol.Options{Host: "conductor-2.example"})
	tk := task(map[string]any{"ipmi_address": "192.0.2.10"})
	if _, err := c.GetConsole(context.Background(), tk); !errors.Is(err, console.ErrNoSession) {
		t.Fatalf("no console: %v, want ErrNoSession", err)
	}
	tk.DriverInternalInfo = map[string]any{ipmisol.InternalAddress: "127.0.0.1:10022"}
	ci, err := c.GetConsole(context.Background(), tk)
	if err != nil || ci != (driver.ConsoleInfo{Type: "socat", URL: "tcp://conductor-2.example:10022"}) {
		t.Fatalf("GetConsole = %+v, %v", ci, err)
	}
}

// An attached client that stays silent is closed after the idle
// timeout; the console keeps running.
func TestIdleClientClosed(t *testing.T) {
	r := newRig(t, console.Options{IdleTimeout: time.Second})
	info := r.start(t)
	tcp, err := net.Dial("tcp", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	start := time.Now()
	_ = tcp.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err = io.Copy(io.Discard, tcp)
	if err != nil || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("idle client: %v after %s, want closed (EOF) after about 1s", err, time.Since(start))
	}
	if now, ok := r.m.Info(nodeUUID); !ok || !alive(now.PID) {
		t.Fatalf("the console stopped with its idle client: %+v", now)
	}
}

// A node's driver_info console_idle_timeout overrides the interface's
// (and the Manager's) idle timeout: with both at ten minutes, a node
// set to one second has its silent client closed after about a second,
// and the console keeps running.
func TestNodeIdleTimeout(t *testing.T) {
	r := newRig(t, console.Options{IdleTimeout: 10 * time.Minute})
	r.c = ipmisol.New(r.m, ipmisol.Options{IdleTimeout: 10 * time.Minute})
	r.task.DriverInfo[ipmisol.IdleTimeoutKey] = 1.0
	info := r.start(t)
	tcp, err := net.Dial("tcp", info.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	start := time.Now()
	_ = tcp.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err = io.Copy(io.Discard, tcp)
	if took := time.Since(start); err != nil || took < 900*time.Millisecond || took > 10*time.Second {
		t.Fatalf("idle client: %v after %s, want closed (EOF) after about 1s", err, took)
	}
	if now, ok := r.m.Info(nodeUUID); !ok || !alive(now.PID) {
		t.Fatalf("the console stopped with its idle client: %+v", now)
	}
}

// A stale SOL session on the BMC (held by another ipmitool, or left by a
// killed console) is dropped by the "sol deactivate" run before each
// start: a second StartConsole, a start beside a foreign session, and the
// Manager's restart after the console was killed all reach the machine.
func TestStaleSessionDropped(t *testing.T) {
	r := newRig(t, console.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	roundTrip := func(label string) {
		t.Helper()
		info, ok := r.m.Info(nodeUUID)
		if !ok {
			t.Fatalf("%s: no console", label)
		}
		var tcp net.Conn
		var err error
		for range 50 { // the restarted console's port may still be closing
			if tcp, err = net.Dial("tcp", info.Addr); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		defer tcp.Close()
		// Keys typed while a restarted ipmitool is still opening its
		// session may be dropped (a console between programs has no
		// terminal).
		typeUntilReceived(ctx, t, r.machine, func(p []byte) error { _, err := tcp.Write(p); return err }, label+"\r")
		if err := r.machine.Print(ctx, []byte("ack-"+label+"\r\n")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, tcp, "ack-"+label, 10*time.Second)
	}

	// A foreign SOL session holds the BMC's only SOL payload.
	foreign := exec.CommandContext(ctx, "ipmitool", "-I", "lanplus", "-C", "3", "-H", r.bmc.Addr, "-p", strconv.Itoa(r.bmc.Port), "-U", r.bmc.Username, "-E", "sol", "activate")
	foreign.Env = append(os.Environ(), "IPMITOOL_PASSWORD="+r.bmc.Password)
	ptmx, err := pty.Start(foreign)
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, ptmx, "[SOL Session operational", 15*time.Second)
	first := r.start(t)
	roundTrip("after-foreign")
	_ = foreign.Process.Kill()
	_ = foreign.Wait()
	_ = ptmx.Close()

	// Starting again replaces the running console (and its session).
	second := r.start(t)
	if second.PID == first.PID || alive(first.PID) {
		t.Fatalf("second start: PID %d, first %d alive %v", second.PID, first.PID, alive(first.PID))
	}
	roundTrip("after-restart")

	// Killed behind the Manager's back, the console comes back by itself,
	// its stale session dropped first.
	if err := syscall.Kill(second.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		if now, ok := r.m.Info(nodeUUID); ok && now.PID != 0 && now.PID != second.PID {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the killed console was not restarted")
		case <-time.After(100 * time.Millisecond):
		}
	}
	roundTrip("after-kill")
}
