//go:build linux

// Package webuitest drives the web UI's pages in a headless Chromium for
// tests: the web UI's own browser tests and the VM lab's, which check a
// real machine's timeline.
package webuitest

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts a headless Chromium for the test (ANVIL_TEST_CHROMIUM
// names the binary; the test skips without it) and returns a tab's
// context. Chromium stops when the test ends.
func Browser(tb testing.TB, width, height int) context.Context {
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

// Poll waits until the page's JavaScript expression cond is true; the
// test fails with the start of the page's text if it does not become so
// within timeout.
func Poll(tb testing.TB, bctx context.Context, cond string, timeout time.Duration) {
	tb.Helper()
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
		state, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ''`))
		tb.Fatalf("waiting for %s: %v; page: %q", cond, err, state)
	}
}

// Eval evaluates the JavaScript expression expr in the page.
func Eval[T any](tb testing.TB, bctx context.Context, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(bctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Screenshot saves what the window shows as name in $ANVIL_ARTIFACTS_DIR (a temporary
// directory when unset) and checks it is a picture of something.
func Screenshot(tb testing.TB, bctx context.Context, name string) {
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

// NodePageReady waits until the node page open in bctx has drawn its
// node, timeline and history.
func NodePageReady(tb testing.TB, bctx context.Context, timeout time.Duration) {
	tb.Helper()
	Poll(tb, bctx, `window.anvilNode && window.anvilNode.node && window.anvilNode.timelineAt > 0 && window.anvilNode.historyAt > 0`, timeout)
}

// Phases returns the names of the phases the node page draws, newest
// first ("deploy", "clean", "inspect", ...).
func Phases(tb testing.TB, bctx context.Context) []string {
	tb.Helper()
	return Eval[[]string](tb, bctx, `[...document.querySelectorAll('.phase')].map((p) => p.dataset.phase)`)
}

// PhaseLabels returns the labels of the bars the node page draws in lane
// ("boot", "steps", ...) of its phase number phase (0 is the newest), in
// the order of their start on the time axis, with runs of one label
// (heartbeats, retries) kept as one.
func PhaseLabels(tb testing.TB, bctx context.Context, phase int, lane string) []string {
	tb.Helper()
	labels := Eval[[]string](tb, bctx, `[...document.querySelectorAll('.phase')[`+strconv.Itoa(phase)+`].querySelectorAll('g.bar-group[data-lane="`+lane+`"]')]`+
		`.sort((a, b) => a.querySelector('rect').x.baseVal.value - b.querySelector('rect').x.baseVal.value || 0).map((g) => g.dataset.label)`)
	var out []string
	for _, v := range labels {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// InOrder reports whether want appears in got in order, not necessarily
// next to each other.
func InOrder(got, want []string) bool {
	i := 0
	for _, v := range got {
		if i < len(want) && v == want[i] {
			i++
		}
	}
	return i == len(want)
}
