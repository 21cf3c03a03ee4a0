//go:build linux

package webui_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/statemachine"
)

// browser starts a headless Chromium for the test (ANVIL_TEST_CHROMIUM
// names the binary) and returns a tab's context.
func browser(tb testing.TB, width, height int) context.Context {
	tb.Helper()
	chromium := os.Getenv("ANVIL_TEST_CHROMIUM")
	if chromium == "" {
		tb.Skip("ANVIL_TEST_CHROMIUM (the Chromium binary) is not set")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(width, height),
		chromedp.NoFirstRun,
		chromedp.Headless,
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	tb.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	tb.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(tb.Logf))
	tb.Cleanup(bcancel)
	return bctx
}

// poll waits until the page's expression cond is true.
func poll(tb testing.TB, bctx context.Context, cond string, timeout time.Duration) {
	tb.Helper()
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
		state, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ''`))
		tb.Fatalf("waiting for %s: %v; page: %q", cond, err, state)
	}
}

func eval[T any](tb testing.TB, bctx context.Context, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(bctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// screenshot saves what the window shows as name in $ANVIL_ARTIFACTS_DIR (a temporary
// directory when unset) and checks it is a picture of something.
func screenshot(tb testing.TB, bctx context.Context, name string) {
	tb.Helper()
	shot, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.Fatal(err)
	}
	dir := os.Getenv("ANVIL_ARTIFACTS_DIR")
	if dir == "" {
		dir = tb.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		tb.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	b := img.Bounds()
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	plain := true
	for y := b.Min.Y; y < b.Max.Y && plain; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			if r, g, bl, _ := img.At(x, y).RGBA(); r != r0 || g != g0 || bl != b0 {
				plain = false
				break
			}
		}
	}
	if plain {
		tb.Fatalf("screenshot %s is a single colour", name)
	}
	if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("screenshot %s", filepath.Join(dir, name))
}

// working are the states the fleet page's nodes are in, in turn.
var working = []struct {
	state, target       statemachine.State
	power               statemachine.PowerState
	lastError           string
	maintenance, health string
}{
	{state: statemachine.Active, power: statemachine.PowerOn, health: "OK"},
	{state: statemachine.Active, power: statemachine.PowerOn, health: "OK"},
	{state: statemachine.Available, power: statemachine.PowerOff, health: "OK"},
	{state: statemachine.DeployWait, target: statemachine.Active, power: statemachine.PowerOn, health: "OK"},
	{state: statemachine.Active, power: statemachine.PowerOn, health: "Warning", maintenance: "fan 2 failed"},
	{state: statemachine.CleanWait, target: statemachine.Available, power: statemachine.PowerOn, health: "OK"},
	{state: statemachine.Active, power: statemachine.PowerOn, health: "OK"},
	{state: statemachine.DeployFailed, target: statemachine.Active, power: statemachine.PowerOn, health: "OK",
		lastError: "Timeout reached while waiting for callback for node: boot stalled: DHCP offered 192.0.2.23 at 10:42:03, no TFTP request in 300 s"},
	{state: statemachine.Manageable, power: statemachine.PowerOff},
	{state: statemachine.Deploying, target: statemachine.Active, power: statemachine.PowerOn, health: "OK"},
	{state: statemachine.Available, power: statemachine.PowerOff, health: "OK"},
	{state: statemachine.Active, power: statemachine.PowerOn, health: "Critical", lastError: "Failed to get power state for node: BMC unreachable"},
}

// fleetFigures are what one run of the fleet page measured.
type fleetFigures struct {
	// load is from the navigation's start to the page listing every node;
	// snapshot is the part of it the snapshot's request took (server and
	// transfer).
	load, snapshot time.Duration
	// latency is from the conductor publishing a node's change to the
	// page drawing it.
	latency time.Duration
	// burst is the same for the last of many changes made at once.
	burst      time.Duration
	burstNodes int
}

// fleetPage enrolls nodes nodes, opens the fleet page, changes one node's
// state and measures.
func fleetPage(tb testing.TB, nodes int, shot string) fleetFigures {
	s := newStackTB(tb, conductor.Options{MaxConcurrentClean: -1})
	// The first node (on screen) and the last tenth (changed at once
	// below) are new; the others are a fleet at work, in every state.
	n := min(nodes/10, 500)
	batch := make([]*baremetal.Node, nodes)
	for i := range batch {
		batch[i] = &baremetal.Node{Name: fmt.Sprintf("rack%02d-node%04d", i/40, i), Driver: "fake-hardware", ProvisionState: statemachine.Enroll,
			PowerState: statemachine.PowerOff}
		if i > 0 && i < nodes-n {
			at := working[i%len(working)]
			nd := batch[i]
			nd.ProvisionState, nd.TargetProvisionState, nd.PowerState, nd.LastError = at.state, at.target, at.power, at.lastError
			nd.Maintenance, nd.MaintenanceReason, nd.Health = at.maintenance != "", at.maintenance, at.health
		}
	}
	if err := s.store.CreateNodes(s.ctx, batch); err != nil {
		tb.Fatal(err)
	}
	bctx := browser(tb, 1400, 900)
	if err := chromedp.Do(bctx, chromedp.Navigate(s.srv.URL+"/ui/")); err != nil {
		tb.Fatal(err)
	}
	poll(tb, bctx, fmt.Sprintf(`window.anvilFleet && window.anvilFleet.loaded && window.anvilFleet.count === %d`, nodes), 2*time.Minute)
	var figs fleetFigures
	figs.load = time.Duration(eval[float64](tb, bctx, `window.anvilFleet.loadedAt`) * float64(time.Millisecond))
	figs.snapshot = time.Duration(eval[float64](tb, bctx, `performance.getEntriesByName(location.origin + '/ui/api/fleet')[0].duration`) * float64(time.Millisecond))
	poll(tb, bctx, `document.getElementById('live').textContent === 'live'`, 30*time.Second)
	if rows := eval[int](tb, bctx, `document.querySelectorAll('#spacer .row:not([hidden])').length`); rows == 0 || rows > 200 {
		tb.Fatalf("%d row elements drawn for %d nodes; want only those on screen", rows, nodes)
	}
	// A marker that a reload would lose.
	eval[bool](tb, bctx, `window.__sameDocument = true`)

	// One node, on screen (the first by name), changes state.
	first := batch[0]
	latency := func(uuids []string, act func()) time.Duration {
		tb.Helper()
		published := make(chan time.Time, len(uuids))
		want := map[string]bool{}
		for _, u := range uuids {
			want[u] = true
		}
		cancel := s.c.Subscribe(conductor.WatchFilter{Nodes: uuids, Types: []conductor.EventType{conductor.EventTransition}}, func(e conductor.Event) {
			if e.To == statemachine.Manageable {
				published <- e.Time
			}
		})
		defer cancel()
		act()
		var last time.Time
		for range uuids {
			select {
			case at := <-published:
				if at.After(last) {
					last = at
				}
			case <-time.After(2 * time.Minute):
				tb.Fatal("the nodes did not become manageable")
			}
		}
		list := `['` + strings.Join(uuids, `','`) + `']`
		poll(tb, bctx, `(() => { const f = window.anvilFleet; return `+list+`.every((u) => f.row(u).provision_state === 'manageable' && f.renderedAt[u]); })()`,
			time.Minute)
		drawn := eval[float64](tb, bctx, `Math.max(...`+list+`.map((u) => window.anvilFleet.renderedAt[u]))`)
		return time.Duration((drawn - float64(last.UnixMicro())/1000) * float64(time.Millisecond))
	}
	figs.latency = latency([]string{first.UUID}, func() {
		if err := s.c.Manage(s.ctx, first.UUID); err != nil {
			tb.Fatal(err)
		}
	})
	poll(tb, bctx, `document.querySelector('#spacer .row[data-uuid="`+first.UUID+`"]').dataset.state === 'manageable'`, 10*time.Second)
	if !eval[bool](tb, bctx, `window.__sameDocument === true`) {
		tb.Fatal("the page reloaded")
	}

	// Many nodes at once: the latency of the last one drawn.
	var uuids []string
	for _, node := range batch[nodes-n:] {
		uuids = append(uuids, node.UUID)
	}
	figs.burstNodes = n
	figs.burst = latency(uuids, func() {
		errs := make(chan error, len(uuids))
		for _, u := range uuids {
			go func() { errs <- s.c.Manage(s.ctx, u) }()
		}
		for range uuids {
			if err := <-errs; err != nil {
				tb.Fatal(err)
			}
		}
	})

	// The filters narrow the list.
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS(`#q`), batch[7].Name)); err != nil {
		tb.Fatal(err)
	}
	poll(tb, bctx, `window.anvilFleet.shown === 1`, 10*time.Second)
	eval[bool](tb, bctx, `(() => { const q = document.getElementById('q'); q.value = ''; return q.dispatchEvent(new Event('input')); })()`)
	poll(tb, bctx, fmt.Sprintf(`window.anvilFleet.shown === %d`, nodes), 10*time.Second)
	if shot != "" {
		screenshot(tb, bctx, shot)
	}
	return figs
}

// TestBrowserFleet opens the fleet page in headless Chromium on 1,000
// nodes: every node is listed, and a node's state change is drawn, from
// the conductor's event to the page, within 1 s, without a reload.
func TestBrowserFleet(t *testing.T) {
	figs := fleetPage(t, 1000, "fleet-page.png")
	t.Logf("1,000 nodes: page loaded in %v (the snapshot's request %v); one change drawn %v after its event; the last of %d changes made at once drawn %v after its event",
		figs.load, figs.snapshot, figs.latency, figs.burstNodes, figs.burst)
	if figs.latency > time.Second {
		t.Fatalf("a state change was drawn %v after its event; want within 1 s", figs.latency)
	}
}

// BenchmarkFleetPage measures the fleet page on 10,000 nodes: the load
// time (navigation to every node listed) and the update latency (a
// conductor event to the page drawing it; "burst": the last of 500
// changes made at once).
//
//	ANVIL_TEST_CHROMIUM=/usr/bin/chromium go test ./webui -run '^$' -bench FleetPage -benchtime 1x
func BenchmarkFleetPage(b *testing.B) {
	for range b.N {
		figs := fleetPage(b, 10000, "fleet-page-10000.png")
		b.ReportMetric(float64(figs.load.Microseconds())/1000, "load-ms")
		b.ReportMetric(float64(figs.snapshot.Microseconds())/1000, "snapshot-ms")
		b.ReportMetric(float64(figs.latency.Microseconds())/1000, "update-ms")
		b.ReportMetric(float64(figs.burst.Microseconds())/1000, "burst-update-ms")
	}
}

// TestBrowserNodePage deploys a simulated network-booted machine and
// opens its page in headless Chromium: the timeline shows the deploy's
// boot stages and steps in order; a verb asks for a confirmation (cancel
// sends nothing); enabling the console through the page shows the
// console, where a typed line reaches the machine and its answer shows.
func TestBrowserNodePage(t *testing.T) {
	s := newStack(t, conductor.Options{})
	n := s.deploy("browser-node", "52:54:00:bb:00:01")
	bctx := browser(t, 1400, 1000)
	if err := chromedp.Do(bctx, chromedp.Navigate(s.srv.URL+"/ui/nodes/"+n.UUID)); err != nil {
		t.Fatal(err)
	}
	poll(t, bctx, `window.anvilNode && window.anvilNode.node && window.anvilNode.timelineAt > 0 && window.anvilNode.historyAt > 0`, time.Minute)
	if got := eval[string](t, bctx, `document.getElementById('pstate').textContent`); got != "active" {
		t.Fatalf("provision state shown %q", got)
	}
	// The newest phase is drawn first: the deploy.
	labels := func(lane string) []string {
		return eval[[]string](t, bctx, `[...document.querySelector('.phase').querySelectorAll('g.bar-group[data-lane="`+lane+`"]')]`+
			`.sort((a, b) => a.querySelector('rect').x.baseVal.value - b.querySelector('rect').x.baseVal.value || 0).map((g) => g.dataset.label)`)
	}
	if ph := eval[string](t, bctx, `document.querySelector('.phase').dataset.phase`); ph != "deploy" {
		t.Fatalf("first phase drawn %q, want deploy", ph)
	}
	boot := labels("boot")
	wantBoot := []string{"boot prepared", "dhcp discover", "dhcp offer", "dhcp ack", "tftp sent", "boot script", "kernel", "ramdisk", "agent lookup", "agent heartbeat"}
	if got := compact(boot); strings.Join(got, ",") != strings.Join(wantBoot, ",") {
		t.Fatalf("boot stages drawn in the order %v, want %v", boot, wantBoot)
	}
	steps := labels("steps")
	if i, j := index(steps, "deploy.write_image"), index(steps, "deploy.boot_instance"); i < 0 || j < 0 || i > j {
		t.Fatalf("steps drawn in the order %v", steps)
	}
	if eval[int](t, bctx, `document.querySelectorAll('.phase:first-child rect.k-wait').length`) == 0 {
		t.Fatal("no wait drawn")
	}
	if eval[int](t, bctx, `document.querySelectorAll('#history tbody tr').length`) == 0 {
		t.Fatal("no history shown")
	}
	if eval[int](t, bctx, `document.querySelectorAll('#ports tbody tr').length`) != 1 {
		t.Fatal("the port is not shown")
	}

	click := func(sel string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatalf("click %s: %v", sel, err)
		}
	}
	// A cancelled verb sends nothing.
	click(`button[data-verb="power off"]`)
	poll(t, bctx, `document.getElementById('confirm').open`, 10*time.Second)
	click(`#confirm-cancel`)
	poll(t, bctx, `document.getElementById('notice').textContent === 'power off: cancelled'`, 10*time.Second)
	if got, _ := s.store.GetNode(s.ctx, n.UUID); got.PowerState != statemachine.PowerOn {
		t.Fatalf("power %s after a cancelled power off", got.PowerState)
	}

	// Enable the console through the page.
	click(`button[data-verb="enable console"]`)
	poll(t, bctx, `document.getElementById('confirm').open && document.getElementById('confirm-text').textContent.includes('enable console')`, 10*time.Second)
	click(`#confirm-ok`)
	poll(t, bctx, `document.getElementById('notice').textContent === 'enable console: accepted'`, 30*time.Second)
	frameRows := `(() => { const f = document.getElementById('console'); const d = f.hidden ? null : f.contentDocument;` +
		` const r = d && d.querySelector('.xterm-rows'); return r ? r.innerText : ''; })()`
	frameState := `(() => { const f = document.getElementById('console'); const d = f.hidden ? null : f.contentDocument;` +
		` const s = d && d.getElementById('state'); return s ? s.textContent : ''; })()`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](frameState+` === 'connected'`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		frame := eval[string](t, bctx, `(() => { const f = document.getElementById('console'); return 'hidden=' + f.hidden + ' src=' + f.getAttribute('src') +
			' note=' + document.getElementById('console-note').textContent; })()`)
		t.Fatalf("the console did not connect in the page: %v; frame %s", err, frame)
	}

	// Type into the console in the page's frame.
	click(`#console`)
	if err := chromedp.Do(bctx, typeKeys("hello from the node page\r")); err != nil {
		t.Fatal(err)
	}
	poll(t, bctx, frameRows+`.includes('machine got: hello from the node page')`, 30*time.Second)
	eval[bool](t, bctx, `(() => { window.scrollTo(0, 0); return true; })()`)
	screenshot(t, bctx, "node-page.png")
}

// TestBrowserConsolePage opens a console's own page as anvild mounts it
// (behind the API's authentication, at /console/): it types and reads.
func TestBrowserConsolePage(t *testing.T) {
	s := newStack(t, conductor.Options{})
	n := s.enrollMachine("console-node", "52:54:00:bb:00:02")
	if err := s.c.SetConsoleMode(s.ctx, n.UUID, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok := s.consoles.Info(n.UUID); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the console did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok, err := s.consoles.IssueToken(n.UUID, console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	bctx := browser(t, 1024, 640)
	if err := chromedp.Do(bctx, chromedp.Navigate(s.srv.URL+"/console/"+n.UUID+"?token="+tok.Value)); err != nil {
		t.Fatal(err)
	}
	rows := `(document.querySelector('.xterm-rows') ? document.querySelector('.xterm-rows').innerText : '')`
	poll(t, bctx, `document.getElementById('state').textContent === 'connected'`, time.Minute)
	if err := chromedp.Do(bctx, typeKeys("typed in the console page\r")); err != nil {
		t.Fatal(err)
	}
	poll(t, bctx, rows+`.includes('machine got: typed in the console page')`, 30*time.Second)
	screenshot(t, bctx, "console-page-anvild.png")
}

func compact(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// typeKeys types keys as a keyboard does (see the console package's
// browser test: xterm.js cancels the keydown, so no separate char event).
func typeKeys(keys string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, r := range keys {
			down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: string(r), Text: string(r)}
			if r == '\r' {
				down.Key, down.Code, down.WindowsVirtualKeyCode = "Enter", "Enter", 13
			}
			up := down
			up.Type, up.Text = input.DispatchKeyEventTypeKeyUp, ""
			for _, ev := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
