//go:build linux

package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/storetest"

	"go.uber.org/goleak"

	"github.com/anvilmetal/anvil/console"
)

// helperEnv selects what the re-executed test binary does: the hermetic
// "machine" a console talks to, and the other programs the tests need.
const helperEnv = "ANVIL_CONSOLE_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	// Every goroutine of the package has an owner that stops it: none may
	// be left once the tests' Managers are closed.
	goleak.VerifyTestMain(m)
}

// helper returns the Command that runs this test binary as mode.
func helper(mode string, env ...string) console.Command {
	return console.Command{
		Path: os.Args[0],
		Args: []string{"-test.run=^TestHelperMachine$"},
		Env:  append([]string{helperEnv + "=" + mode}, env...),
	}
}

// TestHelperMachine is the name the helper command runs under; the work
// is done by TestMain before any test runs, so in a normal run it only
// checks that the helper modes are all known.
func TestHelperMachine(t *testing.T) {
	for _, mode := range []string{"machine", "spawn", "before", "sleep", "fail", "stubborn", "manager"} {
		if _, ok := helperModes[mode]; !ok {
			t.Errorf("helper mode %q is not defined", mode)
		}
	}
}

var helperModes = map[string]func() int{
	"machine":  machine,
	"spawn":    spawnThenMachine,
	"before":   before,
	"sleep":    sleepForever,
	"fail":     fail,
	"stubborn": stubborn,
	"manager":  managerChild,
}

func runHelper(mode string) int {
	f, ok := helperModes[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	return f()
}

// machine prints a banner and a prompt, and answers each line with the
// line upper-cased. "exit" exits with status 3; "secret" prints the
// password from MACHINE_SECRET, as a careless BMC might.
func machine() int {
	if b := os.Getenv("MACHINE_BANNER"); b != "" {
		fmt.Printf("%s\r\n", b)
	}
	fmt.Printf("ANVIL MACHINE pid %d\r\n", os.Getpid())
	typed := make(chan struct{})
	if every, err := time.ParseDuration(os.Getenv("MACHINE_BANNER_EVERY")); err == nil {
		// For a viewer that attaches late (a browser): the banner again
		// until the first line arrives.
		go func() {
			for {
				select {
				case <-typed:
					return
				case <-time.After(every):
					fmt.Printf("ANVIL MACHINE pid %d\r\n", os.Getpid())
				}
			}
		}()
	}
	if r := os.Getenv("MACHINE_READY"); r != "" {
		time.Sleep(200 * time.Millisecond)
		fmt.Printf("%s\r\n", r)
	}
	fmt.Print("machine> ")
	sc := bufio.NewScanner(os.Stdin)
	first := true
	for sc.Scan() {
		if first {
			close(typed)
			first = false
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "exit":
			return 3
		case "secret":
			fmt.Printf("the password is %s\r\n", os.Getenv("MACHINE_SECRET"))
		default:
			fmt.Printf("machine got: %s\r\n", strings.ToUpper(line))
		}
		fmt.Print("machine> ")
	}
	return 0
}

// spawnThenMachine starts a grandchild (sleepForever) in its own process
// group's default state, prints its PID, then acts as the machine.
func spawnThenMachine() int {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=sleep")
	if err := cmd.Start(); err != nil {
		fmt.Printf("spawn failed: %v\r\n", err)
		return 1
	}
	fmt.Printf("grandchild %d\r\n", cmd.Process.Pid)
	return machine()
}

// before appends one line to BEFORE_FILE.
func before() int {
	f, err := os.OpenFile(os.Getenv("BEFORE_FILE"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	fmt.Fprintf(f, "before %d\n", time.Now().UnixNano())
	if os.Getenv("BEFORE_FAIL") != "" {
		fmt.Printf("before failed with %s\n", os.Getenv("MACHINE_SECRET"))
		return 1
	}
	return 0
}

// sleepForever sleeps (it dies of SIGHUP, SIGTERM or SIGKILL).
func sleepForever() int {
	time.Sleep(time.Hour)
	return 0
}

// fail prints an error naming the password, as ipmitool does not but a
// careless program might, and exits 1.
func fail() int {
	fmt.Printf("Error: unable to establish session with password %s\r\n", os.Getenv("MACHINE_SECRET"))
	return 1
}

// stubborn ignores SIGTERM and SIGHUP, so only SIGKILL ends it.
func stubborn() int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
	return machine()
}

// managerChild runs a Manager with one console whose program spawns a
// grandchild, prints "PIDS <console> <grandchild>" and waits to be
// killed. With MANAGER_CLOSE set it closes the Manager instead, once a
// line arrives on its standard input, and prints "CLOSED".
func managerChild() int {
	m := console.NewManager(console.Options{KillTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	info, err := m.Start(ctx, console.Spec{NodeUUID: "orphan-test", Command: helper("spawn")})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	// No bound of its own: the test kills this process at its end.
	tr := ""
	for !strings.Contains(tr, "machine> ") {
		tr = waitTranscript(m, "orphan-test", "machine> ", time.Second)
	}
	gpid := 0
	for _, f := range strings.Fields(tr) {
		if n, err := strconv.Atoi(f); err == nil && strings.Contains(tr, "grandchild "+f) {
			gpid = n
			break
		}
	}
	fmt.Printf("PIDS %d %d\n", info.PID, gpid)
	if os.Getenv("MANAGER_CLOSE") != "" {
		// Close only once the parent has seen both processes alive.
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		if err := m.Close(); err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		fmt.Println("CLOSED")
		return 0
	}
	time.Sleep(time.Hour)
	return 0
}

// waitTranscript waits until the node's output transcript contains want
// and returns the whole output.
func waitTranscript(m *console.Manager, node, want string, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		out := outputOf(m, node)
		if strings.Contains(out, want) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func outputOf(m *console.Manager, node string) string {
	chunks, _ := m.Transcript(node)
	var b strings.Builder
	for _, c := range chunks {
		if !c.Input {
			b.Write(c.Data)
		}
	}
	return b.String()
}

func inputOf(m *console.Manager, node string) string {
	chunks, _ := m.Transcript(node)
	var b strings.Builder
	for _, c := range chunks {
		if c.Input {
			b.Write(c.Data)
		}
	}
	return b.String()
}

// reader collects what an io.Reader returns, for checks that wait for
// some text.
type reader struct {
	mu   sync.Mutex
	buf  strings.Builder
	err  error
	done chan struct{}
}

func collect(r io.Reader) *reader {
	rd := &reader{done: make(chan struct{})}
	go func() {
		defer close(rd.done)
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			rd.mu.Lock()
			rd.buf.Write(b[:n])
			if err != nil {
				rd.err = err
			}
			rd.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return rd
}

func (rd *reader) String() string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.buf.String()
}

// waitFor fails the test unless the collected text contains want within
// d.
func (rd *reader) waitFor(t *testing.T, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(rd.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %s; got %q", want, d, rd.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEnd waits for the reader to end and returns its error.
func (rd *reader) waitEnd(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-rd.done:
	case <-time.After(d):
		t.Fatalf("reader still open after %s; got %q", d, rd.String())
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.err
}

// newManualClock is a clock moved by hand, so idle timeouts and token
// expiry are decided without waiting.
func newManualClock() *storetest.ManualClock {
	return storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	st := s[i+2]
	return st != 'Z' && st != 'X'
}

// waitGone fails the test unless pid is gone within d.
func waitGone(t *testing.T, what string, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still alive after %s", what, pid, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
