package rfdriver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// kernelLines returns the kernel lines (grub linux/linuxefi, isolinux
// append) of every boot loader configuration of an ISO image.
func kernelLines(t *testing.T, img []byte) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for name, b := range readISO(t, p).files {
		if ok, grub := isBootConfig(name); ok {
			for _, l := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
				f := strings.Fields(l)
				if len(f) > 1 && (grub && (f[0] == "linux" || f[0] == "linuxefi") || !grub && strings.EqualFold(f[0], "append")) {
					lines = append(lines, strings.TrimSpace(l))
				}
			}
		}
	}
	return lines
}

// vmediaSetup serves a stock-looking deploy ISO (redfishtest.WriteBootISO)
// from a loopback web server whose directory is also the media store.
func vmediaSetup(t *testing.T, opts Options) (*redfishtest.Server, *Drivers, string, *httptest.Server) {
	t.Helper()
	s := newServer(t, redfishtest.Options{FetchMedia: true})
	dir := t.TempDir()
	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(web.Close)
	if err := redfishtest.WriteBootISO(filepath.Join(dir, "ipa.iso")); err != nil {
		t.Fatal(err)
	}
	opts.Sleep, opts.PollInterval = noSleep, time.Millisecond
	opts.Media = DirMediaStore{Dir: dir, BaseURL: web.URL}
	opts.DeployISOCacheDir = t.TempDir()
	d := NewDrivers(opts)
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return s, d, dir, web
}

// storeFiles lists the media store directory but the stock ISO.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if de.Name() != "ipa.iso" {
			names = append(names, de.Name())
		}
	}
	return names
}

// TestVirtualMediaPassesRamdiskParameters checks that PrepareRamdisk
// gets the node's ramdisk parameters to a stock IPA ISO, which reads
// only its kernel command line: the CD image the BMC fetches is the
// deploy ISO re-mastered with kernel_append_params and the conductor's
// parameters on every kernel line, published in the media store; no
// parameters floppy by default, and no agent token anywhere. The boot
// interface sets the one-time boot from CD itself. Clean-up ejects the
// CD and removes the node's ISO from the store.
func TestVirtualMediaPassesRamdiskParameters(t *testing.T) {
	s, d, dir, web := vmediaSetup(t, Options{})
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
	cd := s.Resource(sys + "/VirtualMedia/CD1")
	if cd["Inserted"] != true || cd["Image"] != web.URL+"/"+bootISOName(tk.NodeUUID) {
		t.Fatalf("the node's boot ISO is not in the CD: %v", cd)
	}
	args := "nofb ipa-debug=1 ipa-api-url=http://127.0.0.1:6385 ipa-inspection-callback-url=http://127.0.0.1:6385/v1/continue_inspection"
	lines := kernelLines(t, s.MediaContent(sys+"/VirtualMedia/CD1"))
	if len(lines) != 4 {
		t.Fatalf("kernel lines of the CD the BMC fetched: %q", lines)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " "+args) || strings.Contains(l, agentTokenParam) || strings.Contains(l, "boot_method") {
			t.Errorf("kernel line %q: want it to end with %q, without a token or boot_method", l, args)
		}
	}
	if f := s.Resource(sys + "/VirtualMedia/Floppy1"); f["Inserted"] == true {
		t.Fatalf("parameters image inserted without config_via_removable: %v", f)
	}
	if p := s.Stats().SystemBootPatches[redfishtest.SystemID]; !slices.Equal(p, []string{"Cd"}) {
		t.Fatalf("boot override patches %v, want the interface's own Cd", p)
	}
	if err := b.CleanUpRamdisk(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if c := s.Resource(sys + "/VirtualMedia/CD1"); c["Inserted"] != false {
		t.Fatalf("CD not ejected: %v", c)
	}
	if left := storeFiles(t, dir); len(left) != 0 {
		t.Fatalf("left in the media store: %v", left)
	}
	if _, ok := tk.DriverInternalInfo[vmediaBootISOKey]; ok {
		t.Fatal("boot ISO still recorded")
	}

	// With config_via_removable the parameters also go on an ir-vfd-dev
	// image in the floppy, and boot_method=vmedia on the kernel line
	// makes IPA read it.
	tk.DriverInfo["config_via_removable"] = "true"
	if err := b.PrepareRamdisk(ctx, tk, params); err != nil {
		t.Fatal(err)
	}
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
	for _, l := range kernelLines(t, s.MediaContent(sys+"/VirtualMedia/CD1")) {
		if !strings.HasSuffix(l, " nofb ipa-debug=1 boot_method=vmedia ipa-api-url=http://127.0.0.1:6385 ipa-inspection-callback-url=http://127.0.0.1:6385/v1/continue_inspection") {
			t.Errorf("kernel line %q without boot_method=vmedia", l)
		}
	}
	if err := b.CleanUpRamdisk(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if f := s.Resource(sys + "/VirtualMedia/Floppy1"); f["Inserted"] != false {
		t.Fatalf("parameters image not ejected: %v", f)
	}
	if left := storeFiles(t, dir); len(left) != 0 {
		t.Fatalf("left in the media store: %v", left)
	}
	if _, ok := tk.DriverInternalInfo[vmediaParamsKey]; ok {
		t.Fatal("parameters image still recorded")
	}

	// Parameters that cannot be carried, and an agent token, are refused
	// by name before anything is published or inserted.
	for _, c := range []struct {
		params map[string]any
		key    string
	}{
		{map[string]any{"ipa-api-url": "http://a b"}, "params"},
		{map[string]any{"ipa-api-url": "http://a/$(reboot)"}, "params"},
		{map[string]any{"ipa-api-url": "http://a", agentTokenParam: "secret-token"}, agentTokenParam},
	} {
		var ip *driver.InvalidParameterError
		err := b.PrepareRamdisk(ctx, tk, c.params)
		if !errors.As(err, &ip) || ip.Key != c.key || strings.Contains(err.Error(), "secret-token") {
			t.Fatalf("%v: want InvalidParameterError for %s, got %v", c.params, c.key, err)
		}
	}
	if c := s.Resource(sys + "/VirtualMedia/CD1"); c["Inserted"] != false {
		t.Fatalf("CD inserted by a refused call: %v", c)
	}
	if left := storeFiles(t, dir); len(left) != 0 {
		t.Fatalf("published by a refused call: %v", left)
	}
}

// TestDeployISOSizeLimit checks that a deploy ISO over
// Options.MaxDeployISOSize is refused with a DeployISOTooLargeError naming
// the node, the driver_info field and the limit, whether the server
// announces the length, streams without one, or the ISO is a local file;
// and that nothing is published or inserted then.
func TestDeployISOSizeLimit(t *testing.T) {
	const limit = 64 << 10
	s, d, dir, web := vmediaSetup(t, Options{MaxDeployISOSize: limit})
	big := bytes.Repeat([]byte("x"), limit+1)
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(big); i += 4096 {
			_, _ = w.Write(big[i:min(i+4096, len(big))])
			w.(http.Flusher).Flush() // No Content-Length: the body is chunked.
		}
	}))
	t.Cleanup(chunked.Close)
	if err := os.WriteFile(filepath.Join(dir, "big.iso"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name, key, ref string
		size           int64
	}{
		{"announced", "redfish_deploy_iso", web.URL + "/big.iso", limit + 1},
		{"chunked", "deploy_iso", chunked.URL + "/big.iso", -1},
		{"local file", "redfish_deploy_iso", filepath.Join(dir, "big.iso"), limit + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := task(s, nil)
			delete(tk.DriverInfo, "redfish_deploy_iso")
			tk.DriverInfo[c.key] = c.ref
			err := d.VirtualMediaBoot().PrepareRamdisk(ctx, tk, map[string]any{"ipa-api-url": "http://127.0.0.1:6385"})
			var tl *DeployISOTooLargeError
			if !errors.As(err, &tl) || tl.Node != tk.NodeUUID || tl.Field != "driver_info" || tl.Key != c.key || tl.Limit != limit || tl.Size != c.size {
				t.Fatalf("want DeployISOTooLargeError for %s, got %#v (%v)", c.key, tl, err)
			}
			if !errors.Is(err, driver.ErrInvalidParameter) || !strings.Contains(err.Error(), tk.NodeUUID) || !strings.Contains(err.Error(), "65536") {
				t.Fatalf("error %q does not name the node and the limit", err)
			}
			// The plugin protocol carries it as an invalid parameter.
			var ip *driver.InvalidParameterError
			if !errors.As(err, &ip) || ip.Node != tk.NodeUUID || ip.Key != c.key || ip.Kind != driver.KindBoot {
				t.Fatalf("want an InvalidParameterError inside, got %#v", ip)
			}
			if cd := s.Resource(redfishtest.SystemPath(redfishtest.SystemID) + "/VirtualMedia/CD1"); cd["Inserted"] == true {
				t.Fatalf("CD inserted: %v", cd)
			}
			if left := storeFiles(t, dir); !slices.Equal(left, []string{"big.iso"}) {
				t.Fatalf("media store: %v", left)
			}
		})
	}
}

// TestDeployISOCachedByURL checks that a deploy ISO is downloaded once
// for many nodes: later boots revalidate the cached copy with a
// conditional GET (304) and download again only when it changed.
func TestDeployISOCachedByURL(t *testing.T) {
	s, d, dir, _ := vmediaSetup(t, Options{})
	var mu sync.Mutex
	var statuses []int
	files := http.FileServer(http.Dir(dir))
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		files.ServeHTTP(rec, r)
		mu.Lock()
		statuses = append(statuses, rec.status)
		mu.Unlock()
	}))
	t.Cleanup(web.Close)
	ctx := context.Background()
	boot := func() {
		t.Helper()
		tk := task(s, map[string]any{"redfish_deploy_iso": web.URL + "/ipa.iso"})
		if err := d.VirtualMediaBoot().PrepareRamdisk(ctx, tk, map[string]any{"ipa-api-url": "http://127.0.0.1:6385"}); err != nil {
			t.Fatal(err)
		}
	}
	boot()
	boot()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "ipa.iso"), later, later); err != nil {
		t.Fatal(err)
	}
	boot()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(statuses, []int{200, 304, 200}) {
		t.Fatalf("deploy ISO requests answered %v, want one download, one revalidation, one new download", statuses)
	}
}

// statusRecorder records the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// TestDeployISOLocalPath checks that with a media store the deploy ISO
// may be a local path (the BMC fetches the re-mastered copy), and that
// without one a local path is refused at validation, since the BMC could
// not fetch it.
func TestDeployISOLocalPath(t *testing.T) {
	s, d, dir, web := vmediaSetup(t, Options{})
	ctx := context.Background()
	for _, ref := range []string{filepath.Join(dir, "ipa.iso"), "file://" + filepath.Join(dir, "ipa.iso")} {
		tk := task(s, map[string]any{"redfish_deploy_iso": ref})
		if err := d.VirtualMediaBoot().Validate(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if err := d.VirtualMediaBoot().PrepareRamdisk(ctx, tk, map[string]any{"ipa-api-url": "http://127.0.0.1:6385"}); err != nil {
			t.Fatal(err)
		}
		if cd := s.Resource(redfishtest.SystemPath(redfishtest.SystemID) + "/VirtualMedia/CD1"); cd["Image"] != web.URL+"/"+bootISOName(tk.NodeUUID) {
			t.Fatalf("CD: %v", cd)
		}
	}
	plain := NewDrivers(Options{Sleep: noSleep})
	t.Cleanup(func() { _ = plain.Close(ctx) })
	var ip *driver.InvalidParameterError
	tk := task(s, map[string]any{"redfish_deploy_iso": filepath.Join(dir, "ipa.iso")})
	if err := plain.VirtualMediaBoot().Validate(ctx, tk); !errors.As(err, &ip) || ip.Key != "redfish_deploy_iso" {
		t.Fatalf("local path without a media store: want InvalidParameterError, got %v", err)
	}
}

// TestBootISOsBuiltConcurrently builds the boot ISOs of several nodes at
// once from one deploy ISO: one download, the others revalidate, and each
// node's published ISO carries its own parameters only.
func TestBootISOsBuiltConcurrently(t *testing.T) {
	s, d, dir, _ := vmediaSetup(t, Options{})
	var mu sync.Mutex
	statuses := map[int]int{}
	files := http.FileServer(http.Dir(dir))
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		files.ServeHTTP(rec, r)
		mu.Lock()
		statuses[rec.status]++
		mu.Unlock()
	}))
	t.Cleanup(web.Close)
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Go(func() {
			tk := task(s, map[string]any{"redfish_deploy_iso": web.URL + "/ipa.iso"})
			tk.NodeUUID = "node-" + strconv.Itoa(i)
			_, errs[i] = d.VirtualMediaBoot().publishBootISO(context.Background(), tk, "redfish_deploy_iso", web.URL+"/ipa.iso",
				"ipa-api-url=http://127.0.0.1:6385/"+tk.NodeUUID)
		})
	}
	wg.Wait()
	for i := range nodes {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		img, err := os.ReadFile(filepath.Join(dir, bootISOName("node-"+strconv.Itoa(i))))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range kernelLines(t, img) {
			if !strings.HasSuffix(l, " ipa-api-url=http://127.0.0.1:6385/node-"+strconv.Itoa(i)) {
				t.Fatalf("node-%d's ISO has kernel line %q", i, l)
			}
		}
	}
	if statuses[200] != 1 || statuses[304] != nodes-1 {
		t.Fatalf("deploy ISO answers %v, want one download and %d revalidations", statuses, nodes-1)
	}
}

// TestVirtualMediaFailureWithdrawsImages checks that when the BMC
// refuses an image (it cannot download it), PrepareRamdisk removes what
// it published and leaves no medium inserted and nothing recorded.
func TestVirtualMediaFailureWithdrawsImages(t *testing.T) {
	s := newServer(t, redfishtest.Options{FetchMedia: true})
	dir := t.TempDir()
	src := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(src.Close)
	if err := redfishtest.WriteBootISO(filepath.Join(dir, "ipa.iso")); err != nil {
		t.Fatal(err)
	}
	// The store's URL answers 404: the BMC's download fails.
	nowhere := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(nowhere.Close)
	store := t.TempDir()
	d := NewDrivers(Options{Sleep: noSleep, PollInterval: time.Millisecond, Media: DirMediaStore{Dir: store, BaseURL: nowhere.URL}})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	sys := redfishtest.SystemPath(redfishtest.SystemID)
	for _, removable := range []bool{false, true} {
		tk := task(s, map[string]any{"redfish_deploy_iso": src.URL + "/ipa.iso", "config_via_removable": removable})
		if err := d.VirtualMediaBoot().PrepareRamdisk(context.Background(), tk, map[string]any{"ipa-api-url": "http://127.0.0.1:6385"}); err == nil {
			t.Fatalf("removable=%v: PrepareRamdisk succeeded with images the BMC cannot fetch", removable)
		}
		if left, _ := os.ReadDir(store); len(left) != 0 {
			t.Fatalf("removable=%v: left in the media store: %v", removable, left)
		}
		for _, dev := range []string{"CD1", "Floppy1"} {
			if m := s.Resource(sys + "/VirtualMedia/" + dev); m["Inserted"] == true {
				t.Fatalf("removable=%v: %s inserted: %v", removable, dev, m)
			}
		}
		if tk.DriverInternalInfo[vmediaBootISOKey] != nil || tk.DriverInternalInfo[vmediaParamsKey] != nil || tk.DriverInternalInfo["redfish_vmedia_inserted"] != nil {
			t.Fatalf("removable=%v: recorded %v", removable, tk.DriverInternalInfo)
		}
	}
}
