//go:build linux

package console_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/anvilmetal/anvil/console"
)

// TestBrowserConsole opens the console page in a real headless Chromium:
// the machine's banner must appear in xterm.js's rows, a line typed on
// the page must reach the machine, and the page must show the console's
// end.
func TestBrowserConsole(t *testing.T) {
	chromium := os.Getenv("ANVIL_TEST_CHROMIUM")
	if chromium == "" {
		t.Skip("ANVIL_TEST_CHROMIUM (the Chromium binary) is not set")
	}
	m, _ := newManager(t, console.Options{})
	start(t, m, console.Spec{NodeUUID: "browser-1", Command: helper("machine", "MACHINE_BANNER_EVERY=200ms")})
	srv := serve(t, m)
	rw, err := m.IssueToken("browser-1", console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := m.IssueToken("browser-1", console.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1024, 640),
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer bcancel()

	rows := `document.querySelector('.xterm-rows') ? document.querySelector('.xterm-rows').innerText : ''`
	poll := func(cond string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			text, _ := chromedp.Run(bctx, chromedp.Evaluate[string](rows))
			state, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('state').textContent`))
			t.Fatalf("waiting for %s: %v; state %q, terminal %q", cond, err, state, text)
		}
	}

	page := srv.URL + "/console/browser-1?token=" + rw.Value
	if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	poll(`(` + rows + `).includes('ANVIL MACHINE pid')`)
	poll(`document.getElementById('state').textContent === 'connected'`)
	if err := chromedp.Do(bctx, typeKeys("hello browser\r")); err != nil {
		t.Fatal(err)
	}
	if out := waitTranscript(m, "browser-1", "machine got: HELLO BROWSER", wait); !strings.Contains(out, "machine got: HELLO BROWSER") {
		t.Fatalf("the machine did not receive the typed line; output %q", out)
	}
	poll(`(` + rows + `).includes('machine got: HELLO BROWSER')`)

	shot, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("ANVIL_ARTIFACTS_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-page.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if oneColour(img) {
		t.Fatal("screenshot is a single colour")
	}

	// A read-only page says so, and its keys reach nothing.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/browser-1?token="+ro.Value)); err != nil {
		t.Fatal(err)
	}
	poll(`document.getElementById('mode').textContent === 'read-only' && document.getElementById('state').textContent.startsWith('connected')`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(".xterm")), typeKeys("viewer keys\r")); err != nil {
		t.Fatal(err)
	}
	// Stopping the console shows the page's closed state.
	if err := m.Stop(context.Background(), "browser-1"); err != nil {
		t.Fatal(err)
	}
	poll(`document.getElementById('state').textContent === 'closed: console stopped'`)
	if in := inputOf(m, "browser-1"); strings.Contains(in, "viewer") {
		t.Fatalf("a read-only page's keys reached the machine: %q", in)
	}
}

func oneColour(img image.Image) bool {
	b := img.Bounds()
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 {
				return false
			}
		}
	}
	return true
}

// typeKeys types keys as a keyboard does: a keyDown carrying the text
// (from which the browser makes the keypress, unless the page cancelled
// the keydown, as xterm.js does), then a keyUp. chromedp.KeyEvent sends
// a separate char event that no keydown handler can cancel, so xterm.js
// would see every key twice.
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
