package clusterlab_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/internal/clusterlab"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/internal/procstat"
)

// consolePassword is the simulated BMC's password: distinctive, so that
// the test finds it wherever it leaks.
const consolePassword = "C0ns-kill-pw"

// TestConsoleTakeover is the acceptance test of the console's "restart
// and takeover": two conductor processes on PostgreSQL, an ipmi node
// whose ipmitool-socat console is enabled against ipmi_sim (its SOL
// relayed to an ipmisim.Machine standing for the serial port). The
// conductor process running the console is SIGKILLed; its ipmitool
// (found by PID among its children) must be gone within a few seconds,
// and the survivor must take the node over and start the console again:
// ConsoleInfo names the survivor's port, bytes typed there reach the
// machine, console_enabled stays true and the history records the
// takeover's restart.
func TestConsoleTakeover(t *testing.T) {
	if os.Getenv("ANVIL_TEST_POSTGRES_DSN") == "" {
		t.Skip("ANVIL_TEST_POSTGRES_DSN not set: the console takeover test needs PostgreSQL")
	}
	ipmisim.Require(t)
	dsn := chaosDSN(t)
	bin := buildConductor(t)
	machine := ipmisim.NewMachine(t)
	bmc := ipmisim.Start(t, ipmisim.Options{SOL: machine.Addr(), Password: consolePassword})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	if err := machine.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ring := conductor.RingOptions{HeartbeatTimeout: heartbeatTimeout, ResetInterval: time.Second}
	lab, err := clusterlab.NewLab(clusterlab.LabConfig{Store: store, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()

	// A file, not a pipe: the process's Wait must not wait for
	// children that inherited the pipe (a surviving ipmitool would hang
	// Kill instead of failing the test).
	logPath := filepath.Join(t.TempDir(), "conductors.log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	pcfg := clusterlab.ProcessConfig{Binary: bin, DSN: dsn, LabURL: lab.URL(), Stderr: logs, Args: []string{
		"-heartbeat-timeout", heartbeatTimeout.String(), "-keepalive", keepalive.String(),
		"-orphan-check", orphanCheck.String(), "-ring-reset", "1s", "-intent-poll", "1s", "-sync-power", "5s",
		"-log-level", logLevel(), "-ipmi-console"}}
	procs := map[string]*clusterlab.Process{}
	for _, h := range []string{"k1", "k2"} {
		p, err := clusterlab.StartProcess(ctx, pcfg, h)
		if err != nil {
			t.Fatal(err)
		}
		procs[h] = p
		defer p.Stop(5 * time.Second)
	}
	defer func() {
		if t.Failed() {
			t.Logf("conductor logs:\n%s", logText())
		}
	}()

	node, err := clusterlab.EnrollIPMINode(ctx, store, lab.URL(), "console-0", map[string]any{
		"ipmi_address": bmc.Addr, "ipmi_port": float64(bmc.Port), "ipmi_username": bmc.Username,
		"ipmi_password": bmc.Password, "ipmi_cipher_suite": "3", // ipmi_sim has suite 3 only
	})
	if err != nil {
		t.Fatal(err)
	}
	verbs := clusterlab.NewVerbClient([]*clusterlab.Process{procs["k1"], procs["k2"]})
	if _, err := verbs.Call(ctx, node, "console-on", 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// The console runs on one of the two: the one whose Manager has it.
	owner, first := waitConsole(ctx, t, []*clusterlab.Process{procs["k1"], procs["k2"]}, node, "")
	survivor := procs["k1"]
	if owner == survivor {
		survivor = procs["k2"]
	}
	// Any conductor answers ConsoleInfo, with the same URL.
	if st, err := survivor.Console(ctx, node); err != nil || !st.Enabled || st.URL != first.URL || st.PID != 0 {
		t.Fatalf("ConsoleInfo on %s: %+v, %v; want enabled at %s, not run there", survivor.Host, st, err, first.URL)
	}
	typeUntilReceived(ctx, t, machine, first.URL, "before-kill\r")

	// The console's ipmitool is the owner's child, with no password in
	// its arguments.
	if ppid := parentOf(first.PID); ppid != owner.PID() {
		t.Fatalf("console PID %d has parent %d, want conductor %s (%d)", first.PID, ppid, owner.Host, owner.PID())
	}
	if !slices.Contains(childrenOf(t, owner.PID()), first.PID) {
		t.Fatalf("console PID %d is not among the children of %s (%v)", first.PID, owner.Host, childrenOf(t, owner.PID()))
	}
	if args := cmdlineOf(first.PID); !isIpmitool(first.PID) || !slices.Contains(args, "activate") || strings.Contains(strings.Join(args, " "), consolePassword) {
		t.Fatalf("console PID %d runs %q; want ipmitool sol activate without the password", first.PID, args)
	}

	// SIGKILL the owner: no ipmitool of its own (the console's, and any
	// power call's that was under way) may survive it.
	var kids []int
	for _, pid := range childrenOf(t, owner.PID()) {
		if isIpmitool(pid) {
			kids = append(kids, pid)
		}
	}
	if !slices.Contains(kids, first.PID) {
		t.Fatalf("the console's ipmitool %d is not among the ipmitool children %v of %s", first.PID, kids, owner.Host)
	}
	killedAt := time.Now()
	owner.Kill()
	for {
		var left []int
		for _, pid := range kids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Since(killedAt) > 3*time.Second {
			t.Fatalf("ipmitool %v of the killed conductor %s still run %s after the SIGKILL", left, owner.Host, time.Since(killedAt))
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := time.Since(killedAt)

	// The survivor takes the node over and restarts the console on a
	// port of its own.
	took, second := waitConsole(ctx, t, []*clusterlab.Process{survivor}, node, first.URL)
	restarted := time.Since(killedAt)
	if took != survivor || parentOf(second.PID) != survivor.PID() {
		t.Fatalf("restarted console PID %d has parent %d, want survivor %s (%d)", second.PID, parentOf(second.PID), survivor.Host, survivor.PID())
	}
	typeUntilReceived(ctx, t, machine, second.URL, "after-takeover\r")
	n, err := store.GetNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if !n.ConsoleEnabled || n.LastError != "" {
		t.Fatalf("after the takeover: console_enabled %v, last_error %q", n.ConsoleEnabled, n.LastError)
	}
	hist, err := store.ListHistory(ctx, node, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !hasConsoleRestore(hist, survivor.Host) {
		t.Fatalf("no console restore by %s in the history: %s", survivor.Host, describeHistory(hist))
	}
	if strings.Contains(logText(), consolePassword) {
		t.Fatal("the BMC password is in the conductors' logs")
	}
	t.Logf("console on %s (%s, ipmitool %d); SIGKILL: its %d ipmitool gone after %s; console back on %s (%s, ipmitool %d) %s after the SIGKILL",
		owner.Host, first.URL, first.PID, len(kids), gone.Round(time.Millisecond), survivor.Host, second.URL, second.PID, restarted.Round(time.Millisecond))
}

// waitConsole polls procs until one reports node's console enabled and
// running in its own process, at a URL other than notURL; it returns
// that process and its status.
func waitConsole(ctx context.Context, t *testing.T, procs []*clusterlab.Process, node, notURL string) (*clusterlab.Process, clusterlab.ConsoleStatus) {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	var last []string
	for time.Now().Before(deadline) {
		last = last[:0]
		for _, p := range procs {
			if !p.Alive() {
				continue
			}
			st, err := p.Console(ctx, node)
			last = append(last, fmt.Sprintf("%s: %+v %v", p.Host, st, err))
			if err == nil && st.Enabled && st.PID > 0 && st.URL != "" && st.URL != notURL {
				return p, st
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("no conductor runs the console of %s: %v", node, last)
	return nil, clusterlab.ConsoleStatus{}
}

// typeUntilReceived connects to the raw console at consoleURL
// (tcp://host:port) and types text until the machine has it: keys typed
// while ipmitool is still setting its terminal up may be cooked or
// dropped. Then the machine prints an answer, which must reach the
// client.
func typeUntilReceived(ctx context.Context, t *testing.T, machine *ipmisim.Machine, consoleURL, text string) {
	t.Helper()
	u, err := url.Parse(consoleURL)
	if err != nil || u.Scheme != "tcp" {
		t.Fatalf("console URL %q: %v", consoleURL, err)
	}
	var conn net.Conn
	for range 50 {
		if conn, err = net.DialTimeout("tcp", u.Host, 2*time.Second); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dialing the console at %s: %v", u.Host, err)
	}
	defer conn.Close()
	for attempt := 0; ; attempt++ {
		if _, err := conn.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := machine.WaitTyped(wctx, text)
		cancel()
		if err == nil {
			break
		}
		if attempt == 10 {
			t.Fatalf("typing %q at %s: %v; the machine has %q", text, u.Host, err, machine.Typed())
		}
	}
	ack := "ack-" + strings.TrimSpace(text)
	if err := machine.Print(ctx, []byte(ack+"\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var seen []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(seen, []byte(ack)) {
		n, err := conn.Read(buf)
		seen = append(seen, buf[:n]...)
		if err != nil {
			t.Fatalf("reading %q from the console at %s: read %q, then %v", ack, u.Host, seen, err)
		}
	}
}

// childrenOf returns pid's children, from every thread's
// /proc/<pid>/task/<tid>/children (a child belongs to the thread that
// forked it).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no /proc/%d/task/*/children: %v", pid, err)
	}
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		for _, w := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(w); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// cmdlineOf returns pid's arguments (nil when it is gone).
func cmdlineOf(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// isIpmitool reports whether pid runs ipmitool: the processes are found
// by their parent's PID, this only tells the conductor's ipmitool
// children from its other ones.
func isIpmitool(pid int) bool {
	args := cmdlineOf(pid)
	return len(args) > 0 && filepath.Base(args[0]) == "ipmitool"
}

// alive reports whether pid runs: zombies (killed, not yet reaped by
// whoever inherited them) count as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// hasConsoleRestore reports whether hist has the record of host starting
// the console again after a takeover (or at its start-up).
func hasConsoleRestore(hist []*baremetal.HistoryEntry, host string) bool {
	for _, h := range hist {
		if h.EventType == "console" && h.Conductor == host && h.Severity == baremetal.HistoryInfo &&
			(h.Event == "console taken over" || h.Event == "console restored") {
			return true
		}
	}
	return false
}

func describeHistory(hist []*baremetal.HistoryEntry) string {
	var b strings.Builder
	for _, h := range hist {
		fmt.Fprintf(&b, "\n  %s %s/%s by %s: %s", h.Severity, h.EventType, h.Event, h.Conductor, h.Message)
	}
	return b.String()
}

// parentOf returns pid's parent PID (0 if gone).
func parentOf(pid int) int {
	st, _ := procstat.Read(pid)
	return st.PPID
}
