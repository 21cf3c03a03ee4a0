package rfdriver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// TestVirtualMediaPassesRamdiskParameters checks that PrepareRamdisk
// gets the node's ramdisk parameters to the ramdisk as a stock IPA reads
// them: parameters.txt on an image labelled ir-vfd-dev, which the BMC
// fetches from the media store and presents as a virtual USB stick or
// floppy, next to the deploy ISO in the virtual CD; the boot interface
// sets the one-time boot from CD itself. Clean-up ejects both and removes
// the image.
func TestVirtualMediaPassesRamdiskParameters(t *testing.T) {
	s := newServer(t, redfishtest.Options{FetchMedia: true})
	dir := t.TempDir()
	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(web.Close)
	// The deploy ISO is served too, since this BMC downloads what it is given.
	if err := os.WriteFile(filepath.Join(dir, "ipa.iso"), []byte("not really an ISO"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDrivers(Options{Sleep: noSleep, PollInterval: time.Millisecond, Media: DirMediaStore{Dir: dir, BaseURL: web.URL}})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	ctx := context.Background()
	tk := task(s, map[string]any{"redfish_deploy_iso": web.URL + "/ipa.iso", "kernel_append_params": "nofb ipa-debug=1"})
	params := map[string]any{
		"ipa-api-url":                 "http://127.0.0.1:6385",
		"ipa-inspection-callback-url": "http://127.0.0.1:6385/v1/continue_inspection",
	}
	b := d.VirtualMediaBoot()
	if err := b.PrepareRamdisk(ctx, tk, params); err != nil {
		t.Fatal(err)
	}
	sys := redfishtest.SystemPath(redfishtest.SystemID)
	floppy := s.Resource(sys + "/VirtualMedia/Floppy1")
	if floppy["Inserted"] != true {
		t.Fatalf("no parameters image inserted: %v", floppy)
	}
	label, got, err := ReadParamsImage(s.MediaContent(sys + "/VirtualMedia/Floppy1"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"boot_method": "vmedia", "ipa-api-url": "http://127.0.0.1:6385",
		"ipa-inspection-callback-url": "http://127.0.0.1:6385/v1/continue_inspection", "ipa-debug": "1"}
	if label != ParamsLabel {
		t.Fatalf("label %q, want %q", label, ParamsLabel)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("parameters.txt %v: %s=%q, want %q", got, k, got[k], v)
		}
	}
	if cd := s.Resource(sys + "/VirtualMedia/CD1"); cd["Inserted"] != true || cd["Image"] != web.URL+"/ipa.iso" {
		t.Fatalf("deploy ISO not in the CD: %v", cd)
	}
	if p := s.Stats().SystemBootPatches[redfishtest.SystemID]; !slices.Equal(p, []string{"Cd"}) {
		t.Fatalf("boot override patches %v, want the interface's own Cd", p)
	}
	if err := b.CleanUpRamdisk(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if f := s.Resource(sys + "/VirtualMedia/Floppy1"); f["Inserted"] != false {
		t.Fatalf("parameters image not ejected: %v", f)
	}
	if _, err := os.Stat(filepath.Join(dir, paramsImageName(tk.NodeUUID))); !os.IsNotExist(err) {
		t.Fatalf("parameters image left in the media store: %v", err)
	}
	if _, ok := tk.DriverInternalInfo[vmediaParamsKey]; ok {
		t.Fatal("parameters image still recorded")
	}
	// A parameter the file format cannot carry is refused, naming it.
	var ip *driver.InvalidParameterError
	if err := b.PrepareRamdisk(ctx, tk, map[string]any{"ipa-api-url": "http://a b"}); !errors.As(err, &ip) || ip.Key != "params" {
		t.Fatalf("want InvalidParameterError, got %v", err)
	}
}
