//go:build linux

package vmlab

import (
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/webui"
	"github.com/anvilmetal/anvil/webui/webuitest"
)

// checkTimelineInBrowser opens the node's page of the web UI, served as
// anvild serves it (Ironic's API at the root, the UI under /ui/) on the
// lab's conductor, in a headless Chromium, after the machine's first
// deploy: the newest phase drawn is the deploy, with its steps in order;
// with network boot, a phase shows the firmware's stages in order from
// DHCP discover to the ramdisk's download; and a phase shows the agent's
// lookup. It skips without ANVIL_TEST_CHROMIUM. The page is saved as the
// screenshot vm-node-page.png (in $ANVIL_ARTIFACTS_DIR when set).
func (lab *e2eLab) checkTimelineInBrowser(t *testing.T) {
	t.Helper()
	if os.Getenv("ANVIL_TEST_CHROMIUM") == "" {
		t.Log("ANVIL_TEST_CHROMIUM not set: the web UI's timeline of the machine is not checked")
		return
	}
	api, err := ironicapi.New(ironicapi.Options{Conductor: lab.cond, Drivers: lab.reg})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := webui.New(webui.Options{Conductor: lab.cond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", api.Protect(ui))
	mux.Handle("/", api)
	srv := httptest.NewServer(mux) // 127.0.0.1, outside the lab's namespace
	// The page's event stream stays open until Chromium goes (at the
	// test's end): cut it, or Close waits for it.
	defer func() {
		srv.CloseClientConnections()
		srv.Close()
	}()

	bctx := webuitest.Browser(t, 1400, 1000)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/nodes/"+lab.node)); err != nil {
		t.Fatal(err)
	}
	webuitest.NodePageReady(t, bctx, time.Minute)
	phases := webuitest.Phases(t, bctx)
	if len(phases) == 0 || phases[0] != "deploy" {
		lab.fail(t, "the node page draws the phases %q; want the deploy first", phases)
	}
	steps := webuitest.PhaseLabels(t, bctx, 0, "steps")
	if !webuitest.InOrder(steps, []string{"deploy.write_image", "deploy.boot_instance"}) {
		lab.fail(t, "the deploy's steps are drawn in the order %q; want deploy.write_image before deploy.boot_instance", steps)
	}
	// A phase that booted the ramdisk over the network draws the
	// firmware's stages in order (inspection: the ramdisk then posts to
	// continue_inspection, not /v1/lookup); virtual media boots the
	// ramdisk from the BMC's ISO, so no firmware stage is drawn. The
	// agent's lookup is drawn in the phase whose boot it belongs to, also
	// when it came after that phase ended (after in-band inspection with
	// fast track, the lookup races the transition to manageable).
	var wantBoot []string
	if lab.bmc.Boot == pxe.NameIPXE {
		wantBoot = []string{"dhcp discover", "dhcp offer", "dhcp ack", "boot script", "kernel", "ramdisk"}
	}
	var seen []string
	booted, lookedUp := len(wantBoot) == 0, false
	for i, ph := range phases {
		boot := webuitest.PhaseLabels(t, bctx, i, "boot")
		seen = append(seen, ph+": "+strings.Join(boot, ", "))
		booted = booted || webuitest.InOrder(boot, wantBoot)
		lookedUp = lookedUp || slices.Contains(boot, "agent lookup")
	}
	if !booted || !lookedUp {
		lab.fail(t, "the node page shows no phase with the boot stages %q in order (found: %v) or no agent lookup (found: %v); drawn:\n%s",
			wantBoot, booted, lookedUp, strings.Join(seen, "\n"))
	}
	webuitest.Screenshot(t, bctx, "vm-node-page.png")
	t.Logf("web UI timeline: phases %q; steps of the deploy %q; boot stages:\n%s", phases, steps, strings.Join(seen, "\n"))
}
