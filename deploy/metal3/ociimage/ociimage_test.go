package ociimage_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/deploy/metal3/ociimage"
)

// buildRootfs builds anvild, the ipmi and redfish plugins and the
// anvil-metal3 entrypoint into rootfs/usr/local/bin, as build-image.sh
// does. The script builds them static (CGO_ENABLED=0, -trimpath); the
// test, which runs them on this machine, builds them with the default
// flags, which share the build cache of the other tests.
func buildRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "local", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", bin+"/", "../../../cmd/anvild", "../../../cmd/anvil-driver-ipmi", "../../../cmd/anvil-driver-redfish", "../anvil-metal3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return root
}

// TestImageOfAnvild writes the image of anvild's root file system twice
// (the digest must not change), checks its contents and configuration,
// unpacks it and runs its entrypoint as a container runtime would, with
// Metal3's environment: anvild must serve the Ironic API with the
// redfish hardware type of the plugin beside it.
func TestImageOfAnvild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds anvild and its plugins")
	}
	root := buildRootfs(t)
	cfg := ociimage.Config{Tag: "latest", Entrypoint: []string{"/usr/local/bin/anvil-metal3"},
		ExposedPorts: []string{"6385/tcp", "6180/tcp"}}
	a, err := ociimage.Build(root, filepath.Join(t.TempDir(), "a"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(t.TempDir(), "b")
	b, err := ociimage.Build(root, layout, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Fatalf("two builds of the same inputs: %s and %s", a.Digest, b.Digest)
	}
	if _, err := ociimage.Build(root, layout, cfg); err == nil {
		t.Error("a second image written over a layout")
	}
	var idx map[string]any
	raw, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil || json.Unmarshal(raw, &idx) != nil || !strings.Contains(string(raw), `"org.opencontainers.image.ref.name":"latest"`) {
		t.Fatalf("index.json %s (%v)", raw, err)
	}
	dir := t.TempDir()
	got, err := ociimage.Unpack(layout, dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Entrypoint, " ") != "/usr/local/bin/anvil-metal3" {
		t.Errorf("entrypoint %q", got.Entrypoint)
	}
	for _, f := range []string{"anvild", "anvil-driver-ipmi", "anvil-driver-redfish", "anvil-metal3"} {
		st, err := os.Stat(filepath.Join(dir, "usr", "local", "bin", f))
		if err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s in the image: %v (mode %v)", f, err, st)
		}
	}

	// Run the unpacked entrypoint with BMO's environment.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// The http_root server's port (Metal3's HTTP_PORT, where httpd was).
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpPort := strconv.Itoa(hl.Addr().(*net.TCPAddr).Port)
	hl.Close()
	entry := filepath.Join(dir, got.Entrypoint[0])
	cmd := exec.Command(entry, "--state-dir", t.TempDir(), "--host", "image-test")
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "XDG_DATA_HOME=" + t.TempDir(),
		"ANVILD=" + filepath.Join(dir, "usr", "local", "bin", "anvild"), "ANVIL_CONFIG=" + filepath.Join(t.TempDir(), "anvild.conf"),
		"PROVISIONING_IP=127.0.0.1", "IRONIC_LISTEN_PORT=" + strconv.Itoa(port), "HTTP_PORT=" + httpPort,
		"DEPLOY_KERNEL_URL=http://127.0.0.1:" + httpPort + "/images/ironic-python-agent.kernel",
		"DEPLOY_RAMDISK_URL=http://127.0.0.1:" + httpPort + "/images/ironic-python-agent.initramfs",
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr // read only once the process has exited
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "anvild: Ironic API on "); ok {
				up <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var u string
	select {
	case u = <-up:
	case err := <-done:
		t.Fatalf("the image's entrypoint exited: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("anvild from the image did not serve within 60 s")
	}
	if want := "http://127.0.0.1:" + strconv.Itoa(port); u != want {
		t.Errorf("API at %s, want %s (the rendered IRONIC_LISTEN_PORT)", u, want)
	}
	req, _ := http.NewRequest(http.MethodGet, u+"/v1/drivers", nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.110")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"redfish"`) {
		t.Errorf("GET /v1/drivers: %d %s; want the redfish hardware type from the image's plugin", resp.StatusCode, body)
	} // anvild serves http_root (/shared/html) at HTTP_PORT itself: a
	// missing image is a 404 from it, not a refused connection.
	resp, err = http.Get("http://127.0.0.1:" + httpPort + "/images/ironic-python-agent.kernel")
	if err != nil {
		t.Fatalf("the http_root server at HTTP_PORT: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET a missing image from http_root: %d, want 404", resp.StatusCode)
	}
}
