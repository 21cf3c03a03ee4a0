package conductor_test

import (
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestDirectDeployImageURLAndChecksum deploys a node whose instance_info
// has image_source, image_url and image_checksum only, against the fake
// IPA that validates image_info as IPA 2023.1 does: the deploy reaches
// active, and the agent got urls [image_url] and checksum. Real IPA
// refused Anvil's old image_info ("Image is missing 'urls' field" with
// image_url set, "Image checksum is not available" without), and the old
// fake accepted it. A node without any checksum fails its deploy before
// the ramdisk boots, naming the missing field.
func TestDirectDeployImageURLAndChecksum(t *testing.T) {
	t.Parallel()
	rec := &agentRecorder{}
	h := newAgentHarness(t, conductor.Options{}, rec.factory)
	const md5 = "9e107d9d372bb6826bd81d3542a419d6"
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("imgurl"), Driver: builtin.FakeHardware,
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name,
		InstanceInfo: map[string]any{"image_source": "http://127.0.0.1:1/images/jammy.img",
			"image_url": "http://127.0.0.1:1/cache/jammy.img", "image_checksum": md5}})
	h.must(err)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	var write *agenttest.Execution
	for _, a := range rec.all() {
		for _, e := range a.Executed() {
			if e.Step != nil && e.Step.Interface == "deploy" && e.Step.Name == "write_image" {
				write = &e
			}
		}
	}
	if write == nil || write.Status != agentclient.StatusSucceeded {
		t.Fatalf("write_image on the agent: %+v, want SUCCEEDED", write)
	}
	info, _ := write.Step.Args["image_info"].(map[string]any)
	if urls, _ := info["urls"].([]any); len(urls) != 1 || urls[0] != "http://127.0.0.1:1/cache/jammy.img" ||
		info["checksum"] != md5 || info["id"] != "jammy.img" || info["node_uuid"] != n.UUID {
		t.Fatalf("image_info sent = %v", info)
	}

	bad, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("nosum"), Driver: builtin.FakeHardware,
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name,
		InstanceInfo: map[string]any{"image_source": "http://127.0.0.1:1/images/jammy.img"}})
	h.must(err)
	h.must(h.c.Manage(h.ctx, bad.UUID))
	h.waitFor(bad.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, bad.UUID))
	h.waitFor(bad.UUID, statemachine.Available)
	boots := h.fleet.Boots(bad.UUID)
	if err := h.c.Deploy(h.ctx, bad.UUID, conductor.DeployOptions{}); err == nil {
		f := h.waitFor(bad.UUID, statemachine.DeployFailed)
		if !strings.Contains(f.LastError, "image_checksum") {
			t.Fatalf("last_error = %q, want it to name image_checksum", f.LastError)
		}
	}
	if got := h.fleet.Boots(bad.UUID); got != boots {
		t.Fatalf("a deploy IPA would refuse booted the ramdisk (%d boots, was %d)", got, boots)
	}
	_ = steps.Deploy
}
