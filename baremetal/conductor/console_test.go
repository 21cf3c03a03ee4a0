package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivermock"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// consoleRec is a console the tests script through a generated mock: it
// records every start and stop per node, fails the operations a test
// arms, and keeps the running consoles in memory, as a real console's
// processes are, so that a conductor restart loses them.
type consoleRec struct {
	mu      sync.Mutex
	calls   []string
	running map[string]bool
	fail    map[string]error // "start:<uuid>", "stop:<uuid>", "validate:<uuid>"
}

func newConsoleRec() *consoleRec {
	return &consoleRec{running: map[string]bool{}, fail: map[string]error{}}
}

func (r *consoleRec) arm(op, uuid string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.fail, op+":"+uuid)
		return
	}
	r.fail[op+":"+uuid] = err
}

func (r *consoleRec) do(op, uuid string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, op+":"+uuid)
	if err := r.fail[op+":"+uuid]; err != nil {
		return err
	}
	switch op {
	case "start":
		r.running[uuid] = true
	case "stop":
		delete(r.running, uuid)
	}
	return nil
}

func (r *consoleRec) count(op, uuid string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c == op+":"+uuid {
			n++
		}
	}
	return n
}

func (r *consoleRec) isRunning(uuid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[uuid]
}

// mock returns a MockConsoleInterface backed by r; host goes into the URL
// it reports, so a test sees which conductor answered.
func (r *consoleRec) mock(t *testing.T, host string) *drivermock.MockConsoleInterface {
	m := drivermock.NewMockConsoleInterface(gomock.NewController(t))
	m.EXPECT().Properties().Return(nil).AnyTimes()
	m.EXPECT().Validate(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, tk *driver.Task) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.fail["validate:"+tk.NodeUUID]
	}).AnyTimes()
	m.EXPECT().StartConsole(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, tk *driver.Task) error {
		return r.do("start", tk.NodeUUID)
	}).AnyTimes()
	m.EXPECT().StopConsole(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, tk *driver.Task) error {
		return r.do("stop", tk.NodeUUID)
	}).AnyTimes()
	m.EXPECT().GetConsole(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, tk *driver.Task) (driver.ConsoleInfo, error) {
		if !r.isRunning(tk.NodeUUID) {
			return driver.ConsoleInfo{}, fmt.Errorf("console/mock: node %s: no console running", tk.NodeUUID)
		}
		return driver.ConsoleInfo{Type: "socat", URL: "tcp://" + host + ":10001/" + tk.NodeUUID}, nil
	}).AnyTimes()
	return m
}

// consoleRegistry is the fake hardware type with the mock console (as
// "mock") beside the fake and no-console ones.
func consoleRegistry(t *testing.T, m driver.ConsoleInterface, fakeCfg fake.Config) *driver.Registry {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindConsole: {fake.Name, "mock", driver.NoConsole}}})
	if err := reg.Register(builtin.Bundle(fakeCfg)); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindConsole, "mock", m); err != nil {
		t.Fatal(err)
	}
	return reg
}

// launchConsoleConductor starts a lone conductor named host over store
// with the mock console of rec, stopped when t ends (or by stop).
func launchConsoleConductor(t *testing.T, store baremetal.Store, host string, rec *consoleRec) (h *harness, stop func()) {
	t.Helper()
	c, err := conductor.New(store, consoleRegistry(t, rec.mock(t, host), fake.Config{}), conductor.Options{Hostname: host,
		LockPolicy: &baremetal.LockPolicy{Attempts: 3, Interval: 5 * time.Millisecond, Clock: clock.System()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Stop(sctx); err != nil {
				t.Errorf("Stop %s: %v", host, err)
			}
		})
	}
	t.Cleanup(stop)
	return &harness{t: t, store: store, c: c, ctx: ctx}, stop
}

// consoleSettled waits until the node has no pending intent and no
// reservation (the console request ran, whatever its outcome) and
// returns it: no failure may leave the node locked.
func consoleSettled(t *testing.T, s baremetal.Store, uuid string) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := s.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if _, pending := n.DriverInternalInfo["anvil_intent"]; !pending && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: console request not settled: intent %v, reserved by %q", uuid, n.DriverInternalInfo["anvil_intent"], n.Reservation)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// consoleHistory returns the node's history entries of type "console".
func consoleHistory(t *testing.T, s baremetal.Store, uuid string) []*baremetal.HistoryEntry {
	t.Helper()
	hs, err := s.ListHistory(context.Background(), uuid, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*baremetal.HistoryEntry
	for _, h := range hs {
		if h.EventType == "console" {
			out = append(out, h)
		}
	}
	return out
}

// wantConsoleHistory fails t unless the node's console history has an
// entry with event and severity whose message contains msg.
func wantConsoleHistory(t *testing.T, s baremetal.Store, uuid, event, severity, msg string) {
	t.Helper()
	hs := consoleHistory(t, s, uuid)
	for _, h := range hs {
		if h.Event == event && h.Severity == severity && strings.Contains(h.Message, msg) {
			return
		}
	}
	var got []string
	for _, h := range hs {
		got = append(got, fmt.Sprintf("%s/%s: %s", h.Event, h.Severity, h.Message))
	}
	t.Errorf("node %s: no console history %q (%s) containing %q; have %q", uuid, event, severity, msg, got)
}

// TestSetConsoleMode is the decision table of SetConsoleMode on the fake
// console: what the call returns at once, and what the owner then leaves
// on the node (console_enabled, last_error, history). Failures are
// injected through the fake's driver_info; every row ends with the node
// unlocked.
func TestSetConsoleMode(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h, _ := launchConsoleConductor(t, store, "table-host", newConsoleRec())
	events := h.c.Watch(h.ctx, conductor.WatchFilter{Types: []conductor.EventType{conductor.EventConsole}})
	type row struct {
		name       string
		console    string         // console interface ("" is the fake default)
		info       map[string]any // driver_info
		before     bool           // console_enabled before the call
		enable     bool
		wantErr    error // returned synchronously
		wantOn     bool
		wantLast   string // last_error substring ("" means empty)
		wantEvent  string // console history event ("" means none)
		wantEvents int    // Watch events
	}
	rows := []row{
		{name: "enable", enable: true, wantOn: true, wantEvent: "console enabled", wantEvents: 1},
		{name: "enable fails", info: map[string]any{fake.FailKey: "console.start_console"}, enable: true,
			wantLast: "Error enabling the console on node %s. Reason: console/fake: start_console", wantEvent: "console enabling failed", wantEvents: 1},
		{name: "disable", before: true, enable: false, wantEvent: "console disabled", wantEvents: 1},
		{name: "disable fails", info: map[string]any{fake.FailKey: "console.stop_console"}, before: true, enable: false, wantOn: true,
			wantLast: "Error disabling the console on node %s. Reason: console/fake: stop_console", wantEvent: "console disabling failed", wantEvents: 1},
		{name: "already enabled", before: true, enable: true, wantOn: true},
		{name: "already disabled", enable: false},
		{name: "no console interface", console: driver.NoConsole, enable: true, wantErr: driver.ErrUnsupported},
		{name: "invalid driver_info", info: map[string]any{fake.DelayKey: "soon"}, enable: true, wantErr: driver.ErrInvalidParameter},
		{name: "validation fails", info: map[string]any{fake.FailKey: "console.validate"}, before: true, enable: false, wantOn: true,
			wantErr: driver.ErrInjectedFailure},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("console"), Driver: builtin.FakeHardware,
				ConsoleInterface: r.console, DriverInfo: r.info})
			if err != nil {
				t.Fatal(err)
			}
			n.ConsoleEnabled = r.before
			n.LastError = "an older failure"
			if r.before {
				n.DriverInternalInfo = map[string]any{fake.ConsoleEnabledKey: true}
			}
			if err := store.UpdateNode(h.ctx, n, ""); err != nil {
				t.Fatal(err)
			}
			before, _ := store.GetNode(h.ctx, n.UUID)
			err = h.c.SetConsoleMode(h.ctx, n.UUID, r.enable)
			if r.wantErr != nil {
				if !errors.Is(err, r.wantErr) || !strings.Contains(err.Error(), n.UUID) {
					t.Fatalf("SetConsoleMode = %v, want %v naming the node", err, r.wantErr)
				}
			} else if err != nil {
				t.Fatalf("SetConsoleMode = %v", err)
			}
			got := consoleSettled(t, store, n.UUID)
			if r.wantErr != nil || r.enable == r.before {
				// Refused or a no-op: nothing written, last_error kept.
				if got.Version != before.Version || got.LastError != "an older failure" {
					t.Fatalf("node changed: version %d -> %d, last_error %q", before.Version, got.Version, got.LastError)
				}
			}
			if got.ConsoleEnabled != r.wantOn {
				t.Errorf("console_enabled = %t, want %t", got.ConsoleEnabled, r.wantOn)
			}
			if want := r.wantLast; want != "" {
				if want = fmt.Sprintf(want, n.UUID); !strings.Contains(got.LastError, want) {
					t.Errorf("last_error = %q, want it to contain %q", got.LastError, want)
				}
			} else if r.wantErr == nil && r.enable != r.before && got.LastError != "" {
				t.Errorf("last_error = %q, want it cleared", got.LastError)
			}
			hist := consoleHistory(t, store, n.UUID)
			if r.wantEvent == "" && len(hist) != 0 {
				t.Errorf("console history %+v, want none", hist[0])
			}
			if r.wantEvent != "" {
				sev := baremetal.HistoryInfo
				if r.wantLast != "" {
					sev = baremetal.HistoryError
				}
				wantConsoleHistory(t, store, n.UUID, r.wantEvent, sev, n.UUID)
			}
			for i := 0; i < r.wantEvents; i++ {
				select {
				case e := <-events:
					if e.NodeUUID != n.UUID || e.Detail != r.wantEvent || (e.Error != "") != (r.wantLast != "") {
						t.Errorf("event %+v, want %q for node %s", e, r.wantEvent, n.UUID)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no console event published")
				}
			}
			select {
			case e := <-events:
				t.Errorf("unexpected console event %+v", e)
			case <-time.After(20 * time.Millisecond):
			}
		})
	}
}

// TestConsoleInfo: a disabled console is refused with
// ErrConsoleNotEnabled, a node without a console interface with
// driver.ErrUnsupported, and an enabled one reports the console's type
// and URL from GetConsole.
func TestConsoleInfo(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h, _ := launchConsoleConductor(t, store, "info-host", newConsoleRec())
	n := h.enroll("console-info", nil)
	_, err := h.c.ConsoleInfo(h.ctx, n.UUID)
	var ne *conductor.ConsoleNotEnabledError
	if !errors.Is(err, conductor.ErrConsoleNotEnabled) || !errors.As(err, &ne) || ne.Node != n.UUID {
		t.Fatalf("ConsoleInfo of a disabled console = %v, want a *ConsoleNotEnabledError", err)
	}
	h.must(h.c.SetConsoleMode(h.ctx, n.Name, true))
	if got := consoleSettled(t, store, n.UUID); !got.ConsoleEnabled {
		t.Fatalf("console not enabled: last_error %q", got.LastError)
	}
	st, err := h.c.ConsoleInfo(h.ctx, n.Name)
	if err != nil || !st.Enabled || st.Info == nil || st.Info.Type != "fake" || st.Info.URL != "fake://console/"+n.UUID {
		t.Fatalf("ConsoleInfo = %+v, %v", st, err)
	}
	h.must(h.c.SetConsoleMode(h.ctx, n.UUID, false))
	consoleSettled(t, store, n.UUID)
	if _, err := h.c.ConsoleInfo(h.ctx, n.UUID); !errors.Is(err, conductor.ErrConsoleNotEnabled) {
		t.Fatalf("ConsoleInfo after disabling = %v", err)
	}

	none, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("no-console"), Driver: builtin.FakeHardware, ConsoleInterface: driver.NoConsole})
	h.must(err)
	if _, err := h.c.ConsoleInfo(h.ctx, none.UUID); !errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("ConsoleInfo without a console interface = %v, want driver.ErrUnsupported", err)
	}
	if _, err := h.c.ConsoleInfo(h.ctx, "no-such-node"); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("ConsoleInfo of an unknown node = %v", err)
	}
}

// TestSetConsoleModeLocked: a node reserved by another conductor, or with
// another accepted operation waiting for a worker, is refused with
// baremetal.ErrNodeLocked (HTTP 409) and left as it was.
func TestSetConsoleModeLocked(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	// The fake console is enabled by name: a computed console list is
	// no-console alone, as Ironic's enabled_console_interfaces default.
	h, _ := launchConsoleConductor(t, store, "console-locked-host", newConsoleRec())
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("console-locked"), Driver: builtin.FakeHardware, ConsoleInterface: fake.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ReserveNode(h.ctx, n.UUID, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	var le *baremetal.NodeLockedError
	if err := h.c.SetConsoleMode(h.ctx, n.UUID, true); !errors.As(err, &le) || le.Holder != "elsewhere" {
		t.Fatalf("SetConsoleMode on a locked node = %v, want a *NodeLockedError naming the holder", err)
	}
	if err := store.ReleaseNode(h.ctx, n.UUID, "elsewhere"); err != nil {
		t.Fatal(err)
	}

	// An accepted intent not yet picked up (written as a verb on another
	// conductor would, with no worker told).
	p, _ := store.GetNode(h.ctx, n.UUID)
	p.DriverInternalInfo = map[string]any{"anvil_intent": map[string]any{"op": "power", "requested_at": time.Now().UTC().Format(time.RFC3339Nano),
		"args": map[string]any{"target": "power on", "timeout": "0s"}}}
	p.TargetPowerState = statemachine.PowerOn
	h.must(store.UpdateNode(h.ctx, p, ""))
	before, _ := store.GetNode(h.ctx, n.UUID)
	if err := h.c.SetConsoleMode(h.ctx, n.UUID, true); !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("SetConsoleMode with a pending intent = %v, want ErrNodeLocked", err)
	}
	after, _ := store.GetNode(h.ctx, n.UUID)
	if after.Version != before.Version || after.Reservation != "" || after.ConsoleEnabled {
		t.Fatalf("refused request changed the node: version %d -> %d, reserved by %q, console %t",
			before.Version, after.Version, after.Reservation, after.ConsoleEnabled)
	}
}

// TestConsoleRestoredAtStartup stops a conductor with three enabled
// consoles and starts it again under the same hostname: the consoles,
// whose processes died with the first run, are started again; one that
// fails to start is disabled with last_error; one parked by a tear-down
// stays stopped.
func TestConsoleRestoredAtStartup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "anvil.db")
	store, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	first := newConsoleRec()
	h, stop := launchConsoleConductor(t, store, "restart-host", first)
	var nodes []*baremetal.Node
	for i := 0; i < 3; i++ {
		n, err := h.c.Enroll(ctx, &baremetal.Node{Name: uniqueName(fmt.Sprintf("restore-%d", i)), Driver: builtin.FakeHardware, ConsoleInterface: "mock"})
		h.must(err)
		h.must(h.c.SetConsoleMode(ctx, n.UUID, true))
		if got := consoleSettled(t, store, n.UUID); !got.ConsoleEnabled {
			t.Fatalf("console %d not enabled: %q", i, got.LastError)
		}
		nodes = append(nodes, n)
	}
	// The third is parked, as a tear-down leaves it.
	parked, _ := store.GetNode(ctx, nodes[2].UUID)
	parked.DriverInternalInfo["anvil_console_parked"] = true
	h.must(store.UpdateNode(ctx, parked, ""))
	stop()

	second := newConsoleRec()
	second.arm("start", nodes[1].UUID, errors.New("ipmitool: SOL payload already active"))
	h2, _ := launchConsoleConductor(t, store, "restart-host", second)
	if second.count("start", nodes[0].UUID) != 1 || !second.isRunning(nodes[0].UUID) {
		t.Errorf("console of %s not restarted at start-up: calls %v", nodes[0].UUID, second.calls)
	}
	ok, _ := store.GetNode(ctx, nodes[0].UUID)
	if !ok.ConsoleEnabled || ok.LastError != "" || ok.Reservation != "" {
		t.Errorf("restored node: console %t, last_error %q, reserved by %q", ok.ConsoleEnabled, ok.LastError, ok.Reservation)
	}
	wantConsoleHistory(t, store, nodes[0].UUID, "console restored", baremetal.HistoryInfo, "started on conductor restart-host")
	st, err := h2.c.ConsoleInfo(ctx, nodes[0].UUID)
	if err != nil || st.Info == nil || st.Info.URL != "tcp://restart-host:10001/"+nodes[0].UUID {
		t.Errorf("ConsoleInfo after restore = %+v, %v", st, err)
	}

	failed, _ := store.GetNode(ctx, nodes[1].UUID)
	want := fmt.Sprintf("Failed to start console of node %s while starting conductor restart-host, so console_enabled is set to false: ipmitool: SOL payload already active", nodes[1].UUID)
	if failed.ConsoleEnabled || failed.LastError != want || failed.Reservation != "" {
		t.Errorf("node whose console failed: console %t, last_error %q (want %q), reserved by %q", failed.ConsoleEnabled, failed.LastError, want, failed.Reservation)
	}
	wantConsoleHistory(t, store, nodes[1].UUID, "console restored failed", baremetal.HistoryError, "SOL payload already active")

	if second.count("start", nodes[2].UUID) != 0 {
		t.Errorf("parked console started at start-up")
	}
	if p, _ := store.GetNode(ctx, nodes[2].UUID); !p.ConsoleEnabled {
		t.Errorf("parked console disabled at start-up: %q", p.LastError)
	}
}

// TestConsoleAcrossDeployAndTearDown: an enabled console is started
// again as the node goes active, stopped (and kept enabled) by the
// tear-down, left stopped through cleaning and a restart, and started by
// the next deploy.
func TestConsoleAcrossDeployAndTearDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "anvil.db")
	store, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rec := newConsoleRec()
	h, stop := launchConsoleConductor(t, store, "deploy-host", rec)
	n, err := h.c.Enroll(ctx, &baremetal.Node{Name: uniqueName("deploy-console"), Driver: builtin.FakeHardware, ConsoleInterface: "mock"})
	h.must(err)
	h.must(h.c.Manage(ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.SetConsoleMode(ctx, n.UUID, true))
	consoleSettled(t, store, n.UUID)
	h.must(h.c.Provide(ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(ctx, n.UUID, conductor.DeployOptions{}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if !a.ConsoleEnabled || a.LastError != "" || rec.count("start", n.UUID) != 2 || !rec.isRunning(n.UUID) {
		t.Fatalf("after deploy: console %t, last_error %q, calls %v", a.ConsoleEnabled, a.LastError, rec.calls)
	}
	wantConsoleHistory(t, store, n.UUID, "console started", baremetal.HistoryInfo, "started on conductor deploy-host")

	h.must(h.c.Undeploy(ctx, n.UUID))
	u := h.waitFor(n.UUID, statemachine.Available)
	if !u.ConsoleEnabled || rec.isRunning(n.UUID) || rec.count("stop", n.UUID) != 1 {
		t.Fatalf("after tear-down: console %t, running %t, calls %v", u.ConsoleEnabled, rec.isRunning(n.UUID), rec.calls)
	}
	wantConsoleHistory(t, store, n.UUID, "console stopped", baremetal.HistoryInfo, "stopped for the tear-down")
	if st, err := h.c.ConsoleInfo(ctx, n.UUID); err != nil || !st.Enabled || st.Info != nil {
		t.Fatalf("ConsoleInfo of a parked console = %+v, %v; want enabled without info", st, err)
	}

	// A restart does not expose the parked console.
	stop()
	h, _ = launchConsoleConductor(t, store, "deploy-host", rec)
	if rec.count("start", n.UUID) != 2 {
		t.Fatalf("parked console started by a restart: calls %v", rec.calls)
	}
	h.must(h.c.Deploy(ctx, n.UUID, conductor.DeployOptions{}))
	a = h.waitFor(n.UUID, statemachine.Active)
	if !a.ConsoleEnabled || !rec.isRunning(n.UUID) || rec.count("start", n.UUID) != 3 {
		t.Fatalf("after the second deploy: console %t, calls %v", a.ConsoleEnabled, rec.calls)
	}
	if st, err := h.c.ConsoleInfo(ctx, n.UUID); err != nil || st.Info == nil || st.Info.Type != "socat" {
		t.Fatalf("ConsoleInfo after the second deploy = %+v, %v", st, err)
	}
}

// TestConsoleDeployTearDownFailures: a console that does not start at
// the end of a deploy is disabled (the deploy succeeds, last_error says
// why); a console that does not stop fails the tear-down, as in Ironic.
func TestConsoleDeployTearDownFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := newConsoleRec()
	store := openStore(t, false)
	h, _ := launchConsoleConductor(t, store, "failures-host", rec)
	deployed := func(name string) *baremetal.Node {
		n, err := h.c.Enroll(ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware, ConsoleInterface: "mock"})
		h.must(err)
		h.must(h.c.Manage(ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Manageable)
		h.must(h.c.Provide(ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Available)
		h.must(h.c.SetConsoleMode(ctx, n.UUID, true))
		consoleSettled(t, store, n.UUID)
		return n
	}

	n := deployed("deploy-start-fails")
	rec.arm("start", n.UUID, errors.New("no free port in the console port range"))
	h.must(h.c.Deploy(ctx, n.UUID, conductor.DeployOptions{}))
	a := h.waitFor(n.UUID, statemachine.Active)
	want := fmt.Sprintf("Failed to start console while deploying the node %s: no free port in the console port range.", n.UUID)
	if a.ConsoleEnabled || a.LastError != want {
		t.Fatalf("deploy with a failing console: console %t, last_error %q, want %q", a.ConsoleEnabled, a.LastError, want)
	}
	wantConsoleHistory(t, store, n.UUID, "console started failed", baremetal.HistoryError, "no free port")

	m := deployed("teardown-stop-fails")
	h.must(h.c.Deploy(ctx, m.UUID, conductor.DeployOptions{}))
	h.waitFor(m.UUID, statemachine.Active)
	rec.arm("stop", m.UUID, errors.New("console process does not die"))
	h.must(h.c.Undeploy(ctx, m.UUID))
	f := h.waitFor(m.UUID, statemachine.Error)
	if !strings.Contains(f.LastError, "Failed to tear down. Error: ") || !strings.Contains(f.LastError, "console process does not die") || !f.ConsoleEnabled {
		t.Fatalf("tear-down with a console that does not stop: console %t, last_error %q", f.ConsoleEnabled, f.LastError)
	}
	wantConsoleHistory(t, store, m.UUID, "console stop failed", baremetal.HistoryError, "while tearing down the node")
}

// TestDeleteStopsConsole: Delete stops an enabled console and deletes the
// node; a console that does not stop is logged and recorded, and the node
// is deleted anyway, as in Ironic.
func TestDeleteStopsConsole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := newConsoleRec()
	store := openStore(t, false)
	h, _ := launchConsoleConductor(t, store, "delete-host", rec)
	for _, stopFails := range []bool{false, true} {
		n, err := h.c.Enroll(ctx, &baremetal.Node{Name: uniqueName("delete"), Driver: builtin.FakeHardware, ConsoleInterface: "mock"})
		h.must(err)
		h.must(h.c.SetConsoleMode(ctx, n.UUID, true))
		consoleSettled(t, store, n.UUID)
		if stopFails {
			rec.arm("stop", n.UUID, errors.New("stop timed out"))
		}
		if err := h.c.Delete(ctx, n.UUID); err != nil {
			t.Fatalf("Delete (stop fails %t): %v", stopFails, err)
		}
		if rec.count("stop", n.UUID) != 1 {
			t.Errorf("Delete (stop fails %t): calls %v, want one stop", stopFails, rec.calls)
		}
		if _, err := store.GetNode(ctx, n.UUID); !errors.Is(err, baremetal.ErrNotFound) {
			t.Errorf("Delete (stop fails %t): node still there: %v", stopFails, err)
		}
	}
}

// TestConsoleTakeover runs two conductors on one store (SQLite and
// PostgreSQL). The owner runs the consoles of an active node and a
// manageable one, then dies; the survivor's local state sync starts both
// consoles (the active node's on re-preparation, the other by the
// console sync), or, when its start fails, disables the console with
// Ironic's takeover message and a history record.
func TestConsoleTakeover(t *testing.T) {
	t.Parallel()
	forBothStores(t, func(t *testing.T, pg bool) {
		for _, fails := range []bool{false, true} {
			t.Run(fmt.Sprintf("start-fails=%t", fails), func(t *testing.T) { consoleTakeover(t, pg, fails) })
		}
	})
}

func consoleTakeover(t *testing.T, pg, fails bool) {
	ctx := context.Background()
	clk := storetest.NewManualClock(clusterEpoch)
	s, dsn := clusterStore(t, pg, clk)
	cl := conductor.ClusterOptions{Notifier: clusterNotifier(t, dsn)}
	victimRec, survivorRec := newConsoleRec(), newConsoleRec()
	member := func(host string, rec *consoleRec) *conductor.Conductor {
		return startMemberReg(t, s, host, consoleRegistry(t, rec.mock(t, host), fake.Config{}), conductor.AgentSettings{}, cl,
			conductor.Options{Clock: storetest.NewManualClock(clusterEpoch)})
	}
	victim := member("victim", victimRec)
	survivor := member("survivor", survivorRec)
	waitAlive(t, survivor, 2)
	waitAlive(t, victim, 2)

	active := ownedBy(t, survivor, "victim")
	idle := ownedBy(t, survivor, "victim")
	for _, n := range []*baremetal.Node{active, idle} {
		n.ConsoleInterface = "mock"
		if err := s.UpdateNode(ctx, n, ""); err != nil {
			t.Fatal(err)
		}
		// Verbs go to the survivor; the victim, the owner, runs them.
		if err := survivor.SetConsoleMode(ctx, n.UUID, true); err != nil {
			t.Fatal(err)
		}
		if got := consoleSettled(t, s, n.UUID); !got.ConsoleEnabled || got.DriverInternalInfo[conductor.ConsoleHostKey] != "victim" {
			t.Fatalf("console of %s: enabled %t on %v (last_error %q)", n.UUID, got.ConsoleEnabled, got.DriverInternalInfo[conductor.ConsoleHostKey], got.LastError)
		}
		if victimRec.count("start", n.UUID) != 1 || survivorRec.count("start", n.UUID) != 0 {
			t.Fatalf("console of %s started by the wrong conductor: victim %v survivor %v", n.UUID, victimRec.calls, survivorRec.calls)
		}
	}
	for _, verb := range []func() error{
		func() error { return survivor.Manage(ctx, active.UUID) },
		func() error { return survivor.Provide(ctx, active.UUID) },
		func() error { return survivor.Deploy(ctx, active.UUID, conductor.DeployOptions{}) },
	} {
		if err := verb(); err != nil {
			t.Fatal(err)
		}
		consoleSettled(t, s, active.UUID)
	}
	waitState(t, s, active.UUID, statemachine.Active)
	// Another conductor answers ConsoleInfo with what the console's
	// conductor recorded.
	st, err := survivor.ConsoleInfo(ctx, active.UUID)
	if err != nil || st.Info == nil || st.Info.URL != "tcp://victim:10001/"+active.UUID {
		t.Fatalf("ConsoleInfo through the survivor = %+v, %v", st, err)
	}
	// While the victim lives, the survivor leaves its consoles alone.
	survivor.SyncLocalState(ctx)
	if survivorRec.count("start", idle.UUID) != 0 {
		t.Fatalf("survivor started a console the live owner runs: %v", survivorRec.calls)
	}

	if fails {
		survivorRec.arm("start", active.UUID, errors.New("BMC refuses SOL"))
		survivorRec.arm("start", idle.UUID, errors.New("BMC refuses SOL"))
	}
	// The victim stops keeping itself alive.
	clk.Advance(61 * time.Second)
	if err := s.KeepaliveConductor(ctx, "survivor", true); err != nil {
		t.Fatal(err)
	}
	if _, err := survivor.Ownership().Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	survivor.SyncLocalState(ctx)

	for _, n := range []*baremetal.Node{active, idle} {
		got := consoleSettled(t, s, n.UUID)
		if survivorRec.count("start", n.UUID) != 1 {
			t.Errorf("survivor started the console of %s %d times, want once: %v", n.UUID, survivorRec.count("start", n.UUID), survivorRec.calls)
		}
		if fails {
			want := fmt.Sprintf("Failed to start console while taking over the node %s: BMC refuses SOL.", n.UUID)
			if got.ConsoleEnabled || got.LastError != want {
				t.Errorf("failed takeover of %s: console %t, last_error %q, want %q", n.UUID, got.ConsoleEnabled, got.LastError, want)
			}
			wantConsoleHistory(t, s, n.UUID, "console taken over failed", baremetal.HistoryError, "while taking over the node")
			continue
		}
		if !got.ConsoleEnabled || got.LastError != "" || got.DriverInternalInfo[conductor.ConsoleHostKey] != "survivor" {
			t.Errorf("taken-over console of %s: enabled %t on %v, last_error %q", n.UUID, got.ConsoleEnabled, got.DriverInternalInfo[conductor.ConsoleHostKey], got.LastError)
		}
		wantConsoleHistory(t, s, n.UUID, "console taken over", baremetal.HistoryInfo, "started on conductor survivor")
		if st, err := survivor.ConsoleInfo(ctx, n.UUID); err != nil || st.Info == nil || st.Info.URL != "tcp://survivor:10001/"+n.UUID {
			t.Errorf("ConsoleInfo after takeover of %s = %+v, %v", n.UUID, st, err)
		}
	}
	// A second pass starts nothing more.
	survivor.SyncLocalState(ctx)
	for _, n := range []*baremetal.Node{active, idle} {
		if c := survivorRec.count("start", n.UUID); c != 1 {
			t.Errorf("second sync: %d starts of %s", c, n.UUID)
		}
	}
}

// TestConsoleHandOverBetweenLiveConductors: a console recorded as run by
// a live conductor that does not own the node is stopped by that
// conductor first, and only then started by the owner, so that one BMC's
// serial-over-LAN session never has two holders.
func TestConsoleHandOverBetweenLiveConductors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := clusterStore(t, false, storetest.NewManualClock(clusterEpoch))
	cl := conductor.ClusterOptions{Notifier: baremetal.NewLocalNotifier()}
	aRec, bRec := newConsoleRec(), newConsoleRec()
	a := startMemberReg(t, s, "a", consoleRegistry(t, aRec.mock(t, "a"), fake.Config{}), conductor.AgentSettings{}, cl,
		conductor.Options{Clock: storetest.NewManualClock(clusterEpoch)})
	b := startMemberReg(t, s, "b", consoleRegistry(t, bRec.mock(t, "b"), fake.Config{}), conductor.AgentSettings{}, cl,
		conductor.Options{Clock: storetest.NewManualClock(clusterEpoch)})
	waitAlive(t, a, 2)
	waitAlive(t, b, 2)
	n := ownedBy(t, a, "a")
	// The console runs on b, as after a ring change moved the node to a.
	n.ConsoleInterface = "mock"
	n.ConsoleEnabled = true
	n.DriverInternalInfo = map[string]any{conductor.ConsoleHostKey: "b"}
	if err := s.UpdateNode(ctx, n, ""); err != nil {
		t.Fatal(err)
	}
	bRec.do("start", n.UUID)

	a.SyncLocalState(ctx)
	if aRec.count("start", n.UUID) != 0 {
		t.Fatalf("the owner started a console b still runs: %v", aRec.calls)
	}
	if err := a.SetConsoleMode(ctx, n.UUID, false); err != nil {
		t.Fatal(err)
	}
	got := consoleSettled(t, s, n.UUID)
	if !got.ConsoleEnabled || !strings.Contains(got.LastError, "still runs on conductor b") || aRec.count("stop", n.UUID) != 0 {
		t.Fatalf("disable on the owner while b runs the console: enabled %t, last_error %q, calls %v", got.ConsoleEnabled, got.LastError, aRec.calls)
	}
	if err := a.Delete(ctx, n.UUID); !errors.Is(err, conductor.ErrDeleteRefused) {
		t.Fatalf("Delete while b runs the console = %v, want ErrDeleteRefused", err)
	}

	b.SyncLocalState(ctx)
	if bRec.isRunning(n.UUID) || bRec.count("stop", n.UUID) != 1 {
		t.Fatalf("b did not stop the console of a node it does not own: %v", bRec.calls)
	}
	wantConsoleHistory(t, s, n.UUID, "console handed over", baremetal.HistoryInfo, "conductor b stopped the console")
	a.SyncLocalState(ctx)
	got = consoleSettled(t, s, n.UUID)
	if !aRec.isRunning(n.UUID) || !got.ConsoleEnabled || got.DriverInternalInfo[conductor.ConsoleHostKey] != "a" {
		t.Fatalf("owner did not start the handed-over console: running %t, enabled %t on %v", aRec.isRunning(n.UUID), got.ConsoleEnabled, got.DriverInternalInfo[conductor.ConsoleHostKey])
	}
}
