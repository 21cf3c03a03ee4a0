//go:build linux

package vmlab

import (
	"net/http"
	"net/http/httptest"
	"os"
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
// deploy: the newest phase drawn is the deploy, with its steps in order,
// and a phase that booted the ramdisk over the network shows the real
// boot stages in order, from the first DHCP discover to the agent's
// lookup (virtual media: the agent's lookup). It skips without ANVIL_TEST_CHROMIUM. The page is saved as
// the screenshot vm-node-page.png (in $ANVIL_ARTIFACTS_DIR when set).
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
	defer srv.Close()

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
	// Network boot draws the firmware's stages; virtual media boots the
	// ramdisk from the BMC's ISO, so only the agent's contact is drawn.
	wantBoot := []string{"agent lookup"}
	if lab.bmc.Boot == pxe.NameIPXE {
		wantBoot = []string{"dhcp discover", "dhcp offer", "dhcp ack", "boot script", "kernel", "ramdisk", "agent lookup"}
	}
	var seen []string
	booted := false
	for i, ph := range phases {
		boot := webuitest.PhaseLabels(t, bctx, i, "boot")
		seen = append(seen, ph+": "+strings.Join(boot, ", "))
		booted = booted || webuitest.InOrder(boot, wantBoot)
	}
	if !booted {
		lab.fail(t, "no phase on the node page shows the boot stages %q in order; drawn:\n%s", wantBoot, strings.Join(seen, "\n"))
	}
	webuitest.Screenshot(t, bctx, "vm-node-page.png")
	t.Logf("web UI timeline: phases %q; steps of the deploy %q; boot stages:\n%s", phases, steps, strings.Join(seen, "\n"))
}
