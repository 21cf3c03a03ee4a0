package vmlab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/imagecache/oci"
	"github.com/anvilmetal/anvil/imagecache/oci/ocitest"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// redfishOCIAndService are the Redfish machine's phases after the
// common ones (issue 30): the OS image pushed to a real registry
// (Debian's docker-registry on the host's loopback) as a single-layer
// OCI artifact in an index (amd64, disktype raw) and deployed from its
// oci:// reference through the conductor's image cache
// (image_download_source local: the conductor downloads the blob,
// verifies its digest and serves it to the agent from its own
// endpoint); the node rebuilt from the same reference, the registry's
// access log showing one download of the blob for the two deploys; then
// the active machine serviced without the ramdisk (disable_ramdisk): a
// BIOS firmware update (the lab BMC stages it and asks for a reset; the
// plugin reboots the machine) and a BIOS setting change (pending until
// the reboot the step makes), the new version and setting read back
// through the conductor, the OS marker printed again after the last
// reboot, the node active.
func redfishOCIAndService(reg *ocitest.Registry) func(t *testing.T, lab *e2eLab, phase func(string, time.Time)) {
	return func(t *testing.T, lab *e2eLab, phase func(string, time.Time)) {
		ctx := context.Background()
		const repo = "anvil/lab-os"
		m, blob, err := reg.PushArtifact(ctx, repo, "", ocitest.Layer{File: lab.img.Raw, Title: "disk.raw"}, false)
		if err != nil {
			t.Fatal(err)
		}
		m.Annotations = map[string]string{oci.DiskTypeAnnotation: "raw"}
		m.Platform = &ocitest.Platform{Architecture: "amd64", OS: "linux"}
		if _, err := reg.PushIndex(ctx, repo, "v1", []ocitest.Descriptor{m}, false); err != nil {
			t.Fatal(err)
		}
		src := "oci://" + reg.Host + "/" + repo + ":v1"
		t.Logf("pushed %s: blob %s (%d bytes)", src, blob.Digest, blob.Size)

		// 6. Deploy from the registry through the image cache.
		start := time.Now()
		if _, err := lab.cond.Update(ctx, lab.node, func(n *baremetal.Node) error {
			n.InstanceInfo = map[string]any{"image_source": src, "image_download_source": "local"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := lab.cond.Deploy(ctx, lab.node, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-oci")}); err != nil {
			t.Fatal(err)
		}
		nd := lab.waitState(t, statemachine.Active, 20*time.Minute)
		marker := lab.osMarker(t, start, "e2e-oci", 10*time.Minute)
		t.Logf("active from %s (power %s); OS marker %.1fs after the deploy began", src, nd.PowerState, marker.At.Sub(start).Seconds())
		lab.checkImageWritten(t)
		lab.checkServedFromCache(t, start)
		phase("deploy-oci (image cache)", start)

		// 7. Rebuild from the same reference: the cache serves it again.
		start = time.Now()
		if err := lab.cond.Rebuild(ctx, lab.node, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-oci-rebuild")}); err != nil {
			t.Fatal(err)
		}
		lab.waitState(t, statemachine.Active, 20*time.Minute)
		lab.osMarker(t, start, "e2e-oci-rebuild", 10*time.Minute)
		lab.checkImageWritten(t)
		lab.checkServedFromCache(t, start)
		downloads, bytes := reg.BlobDownloads(repo, blob.Digest)
		st := lab.images.Stats()
		t.Logf("registry access log: %d download(s) of %s (%d bytes) for two deploys; image cache: %d download(s), %d origin bytes, %d hit(s), %d bytes served",
			downloads, blob.Digest, bytes, st.Downloads, st.OriginBytes, st.Hits, st.ServedBytes)
		if downloads != 1 || bytes != blob.Size || st.Downloads != 1 {
			lab.fail(t, "two deploys downloaded the blob %d times (%d bytes) from the registry, the cache %d times; want once", downloads, bytes, st.Downloads)
		}
		phase("rebuild-oci (cache hit)", start)

		// 8. Service the active machine out of band.
		fw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/bios-lab-2.0.bin" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(strings.Repeat("firmware ", 4096)))
		}))
		defer fw.Close()
		start = time.Now()
		starts := len(lab.m.Starts())
		svc := []steps.Step{
			{Interface: "firmware", Name: "update", Args: map[string]any{"settings": []any{map[string]any{"component": "bios", "url": fw.URL + "/bios-lab-2.0.bin"}}}},
			{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "NumLock", "value": "Off"}}}},
		}
		if err := lab.cond.Service(ctx, lab.node, svc, conductor.ServiceOptions{DisableRamdisk: true}); err != nil {
			t.Fatal(err)
		}
		nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
		if nd.LastError != "" {
			lab.fail(t, "service ended with %q", nd.LastError)
		}
		all := lab.m.Starts()
		if len(all) <= starts {
			lab.fail(t, "the machine was not rebooted by the service")
		}
		comps, err := lab.cond.FirmwareComponents(ctx, lab.node)
		if err != nil {
			t.Fatal(err)
		}
		var bios string
		for _, c := range comps {
			if c.Component == "bios" {
				bios = c.CurrentVersion
				t.Logf("firmware bios: initial %s, current %s, last flashed %s", c.InitialVersion, c.CurrentVersion, c.LastVersionFlashed)
				if c.InitialVersion != LabBIOSVersion || c.LastVersionFlashed != "bios-lab-2.0" {
					lab.fail(t, "firmware cache %+v", c)
				}
			}
		}
		settings, err := lab.cond.BIOSSettings(ctx, lab.node)
		if err != nil {
			t.Fatal(err)
		}
		numLock := ""
		for _, s := range settings {
			if s.Name == "NumLock" {
				numLock = s.Value
			}
		}
		if bios != "bios-lab-2.0" || numLock != "Off" {
			lab.fail(t, "after servicing: BIOS firmware %q, NumLock %q", bios, numLock)
		}
		// The instance boots again, unchanged: its marker after the last
		// reboot.
		last := all[len(all)-1]
		marker = lab.osMarker(t, last, "e2e-oci-rebuild", 10*time.Minute)
		t.Logf("serviced: %d reboot(s), BIOS firmware %s, NumLock %s; OS marker %.1fs after the last reboot; node %s, power %s",
			len(all)-starts, bios, numLock, marker.At.Sub(last).Seconds(), nd.ProvisionState, nd.PowerState)
		if !lab.m.Powered() {
			lab.fail(t, "the machine is off after servicing")
		}
		lab.checkImageWritten(t)
		phase("service (firmware, BIOS)", start)
	}
}

// checkServedFromCache checks that the agent downloaded the image from
// the conductor's image cache since from (the agent API's request log).
func (lab *e2eLab) checkServedFromCache(t *testing.T, from time.Time) {
	t.Helper()
	for _, e := range lab.tl.between(from, time.Now()) {
		if e.Source == "agent-api" && strings.HasPrefix(e.What, "GET "+labImagesPath) && strings.HasSuffix(e.What, "→ 200") {
			return
		}
	}
	lab.fail(t, "the agent did not download the image from the conductor's cache")
}
