package vmlab

import (
	"context"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/internal/otlptest"
)

// checkDeployTrace checks the trace of the machine's first deploy, as the
// conductor and the BMC's plugin process exported it over OTLP to the
// test's collector: one root span "deploy" for the node and every span's
// parent in the trace; the job, the steps and the agent's write_image
// command under them; the ramdisk's boot as a span with the firmware's
// stages as events, in order (network boot: virtual media has no
// firmware stages); and each driver call to the
// plugin answered by a server span of the plugin process under the
// host's client span.
func (lab *e2eLab) checkDeployTrace(t *testing.T) {
	t.Helper()
	if err := lab.tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	service := "anvil-driver-" + lab.bmc.plugin.Name
	var tree []otlptest.Span
	var root otlptest.Span
	for deadline := time.Now().Add(time.Minute); ; {
		var ok bool
		root, tree, ok = lab.traces.Tree("deploy", lab.node)
		if ok && otlptest.Connected(tree) && otlptest.PluginAnswered(tree, service) {
			break
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, s := range tree {
				lines = append(lines, s.Service+" "+s.Name+" "+s.ID+" parent "+s.Parent)
			}
			lab.fail(t, "no complete trace of the deploy within a minute (root found: %t, %d spans):\n%s", ok, len(tree), strings.Join(lines, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	byID := otlptest.ByID(tree)
	names := map[string]int{}
	for _, s := range tree {
		names[s.Name]++
	}
	for _, want := range []string{"job deploy", "step deploy.deploy.write_image", "agent deploy.execute_deploy_step", "heartbeat"} {
		if names[want] == 0 {
			lab.fail(t, "the deploy's trace has no %q span; it has %v", want, names)
		}
	}
	var plugin, boots int
	for _, s := range tree {
		switch {
		case s.Name == "job deploy" && s.Parent != root.ID:
			lab.fail(t, "job deploy's parent is %s, want the root %s", s.Parent, root.ID)
		case s.Name == "agent deploy.execute_deploy_step" && !otlptest.Descends(byID, s, "step deploy.deploy.write_image") &&
			!otlptest.Descends(byID, s, "step deploy.deploy.deploy"):
			lab.fail(t, "the agent command span %s is under no step", s.ID)
		case s.Service == service:
			plugin++
			host, ok := byID[s.Parent]
			if !ok || host.Service != "anvil-conductor" || host.Kind != tracepb.Span_SPAN_KIND_CLIENT || s.Kind != tracepb.Span_SPAN_KIND_SERVER {
				lab.fail(t, "plugin span %s (%s, kind %v) is not the server child of the host's client span of its call: parent %+v", s.Name, s.ID, s.Kind, host)
			}
		case s.Name == "boot":
			boots++
			if lab.bmc.Boot == pxe.NameIPXE {
				want := []string{"dhcp discover", "dhcp offer", "dhcp ack", "boot script", "kernel", "ramdisk"}
				if !inOrder(s.Events, want) {
					lab.fail(t, "boot span events %q; want %q in order", s.Events, want)
				}
			}
		}
	}
	if lab.bmc.Boot == pxe.NameIPXE && boots == 0 {
		lab.fail(t, "the deploy's trace has no boot span; it has %v", names)
	}
	t.Logf("deploy trace: %d spans (%d of the plugin process %s, %d boot span(s)); names %v", len(tree), plugin, service, boots, names)
}

// inOrder reports whether want occurs in got as a subsequence.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
