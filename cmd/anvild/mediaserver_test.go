package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAnvildServesHTTPRoot starts anvild with [deploy]http_root and
// [anvil]http_root_listen and fetches through it what a BMC fetches: a
// published image in full and by range; a directory, a hidden
// (half-written) file, a path out of the root and a PUT are refused.
func TestAnvildServesHTTPRoot(t *testing.T) {
	root := t.TempDir()
	img := strings.Repeat("boot iso ", 1000)
	if err := os.WriteFile(filepath.Join(root, "node-boot.iso"), []byte(img), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".node-boot.iso.tmp-1"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "anvild.conf")
	if err := os.WriteFile(conf, []byte("[deploy]\nhttp_root = "+root+"\nhttp_url = http://127.0.0.1:1\n[anvil]\nhttp_root_listen = 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startAnvild(t, "--config-file", conf)
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" && time.Now().Before(deadline) {
		for _, l := range strings.Split(d.stdout.String(), "\n") {
			if u, ok := strings.CutPrefix(l, "anvild: http_root on "); ok {
				base = u
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if base == "" {
		t.Fatalf("anvild did not say where it serves http_root; stdout %q", d.stdout.String())
	}
	c := &http.Client{Timeout: 10 * time.Second}
	if code, _, body := get(t, c, base+"/node-boot.iso"); code != http.StatusOK || body != img {
		t.Fatalf("GET the image: %d, %d bytes", code, len(body))
	}
	if code, _, body := get(t, c, base+"/node-boot.iso", "Range", "bytes=0-3"); code != http.StatusPartialContent || body != "boot" {
		t.Fatalf("GET a range: %d %q", code, body)
	}
	for _, p := range []string{"/", "/sub", "/sub/", "/.node-boot.iso.tmp-1", "/../" + filepath.Base(root) + "/node-boot.iso", "/missing.iso"} {
		if code, _, _ := get(t, c, base+p); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
	req, _ := http.NewRequest(http.MethodPut, base+"/new.iso", strings.NewReader("x"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d, want 405", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(root, "new.iso")); err == nil {
		t.Error("PUT wrote a file")
	}
}

// TestHTTPRootListenNeedsHTTPRoot: serving needs a directory to serve.
func TestHTTPRootListenNeedsHTTPRoot(t *testing.T) {
	_, err := parseConfig([]string{"--config-file", writeConf(t, "[anvil]\nhttp_root_listen = 127.0.0.1:0\n")}, nil, func(string, ...any) {})
	if err == nil || !strings.Contains(err.Error(), "[deploy]http_root") {
		t.Fatalf("http_root_listen without http_root: %v", err)
	}
}
