package tftp

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peerEnv, when set, turns a missing peer client into a failure instead of
// a skip (CI sets it where tftp-hpa and atftp are installed).
const peerEnv = "ANVIL_TEST_TFTP_PEERS"

// peer returns the path of a Debian TFTP client, or skips the test.
func peer(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(peerEnv) != "" {
			t.Fatalf("%s is required with %s set: apt-get install %s", name, peerEnv, pkg)
		}
		t.Skipf("%s: not installed (Debian package %s)", name, pkg)
	}
	return p
}

// peerFiles is a served root with files around the block boundaries.
func peerFiles(t *testing.T) (root string, files map[string][]byte) {
	t.Helper()
	root = t.TempDir()
	files = map[string][]byte{
		"empty":      {},
		"b511":       pattern(511, 1),
		"b512":       pattern(512, 2),
		"b1428x3":    pattern(3*1428, 3),
		"mib":        pattern(1<<20+13, 4),
		"text.cfg":   []byte("DEFAULT deploy\nLABEL deploy\r\n  KERNEL vmlinuz\rINITRD x\n"),
		"boot/x/lpx": pattern(7000, 5),
	}
	for name, b := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, files
}

// runPeer runs a client command in dir and returns its combined output.
func runPeer(t *testing.T, dir string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTFTPHPA fetches files with Debian's tftp-hpa client (which asks
// for no options) in binary and ascii mode.
func TestTFTPHPA(t *testing.T) {
	bin := peer(t, "tftp", "tftp-hpa")
	root, files := peerFiles(t)
	st := start(t, &Server{Handler: DirHandler(root)})
	port := strconv.Itoa(int(st.ap.Port()))
	out := t.TempDir()
	for _, name := range []string{"empty", "b511", "b512", "b1428x3", "mib", "boot/x/lpx"} {
		t.Run(name, func(t *testing.T) {
			local := filepath.Join(out, strings.ReplaceAll(name, "/", "_"))
			if o, err := runPeer(t, out, bin, "-m", "binary", "127.0.0.1", port, "-c", "get", name, local); err != nil {
				t.Fatalf("tftp: %v: %s", err, o)
			}
			if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, files[name]) {
				t.Fatalf("%s: %d bytes, %v; want %d, contents equal", name, len(got), err, len(files[name]))
			}
		})
	}
	t.Run("ascii", func(t *testing.T) {
		local := filepath.Join(out, "text.cfg")
		if o, err := runPeer(t, out, bin, "-m", "ascii", "127.0.0.1", port, "-c", "get", "text.cfg", local); err != nil {
			t.Fatalf("tftp: %v: %s", err, o)
		}
		if got, _ := os.ReadFile(local); !bytes.Equal(got, files["text.cfg"]) {
			t.Fatalf("ascii transfer gave %q, want %q", got, files["text.cfg"])
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for name, want := range map[string]string{"missing": "Error code 1", "../etc/passwd": "Error code 2", `boot\..\..\x`: "Error code 2"} {
			o, _ := runPeer(t, out, bin, "-m", "binary", "127.0.0.1", port, "-c", "get", name, filepath.Join(out, "refused"))
			if !strings.Contains(o, want) {
				t.Errorf("get %q: %q, want %q", name, o, want)
			}
		}
	})
}

// TestATFTP fetches files with Debian's atftp client, negotiating
// blksize, tsize and windowsize, and past the block-number rollover.
func TestATFTP(t *testing.T) {
	bin := peer(t, "atftp", "atftp")
	root, files := peerFiles(t)
	if !testing.Short() {
		files["rollover"] = pattern(65536*512+100, 6)
		if err := os.WriteFile(filepath.Join(root, "rollover"), files["rollover"], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := start(t, &Server{Handler: DirHandler(root)})
	port := strconv.Itoa(int(st.ap.Port()))
	out := t.TempDir()
	optionSets := map[string][]string{
		"plain":       nil,
		"blksize1428": {"--option", "blksize 1428", "--option", "tsize enable"},
		"windowsize4": {"--option", "blksize 1024", "--option", "windowsize 4"},
	}
	for set, opts := range optionSets {
		for _, name := range []string{"empty", "b511", "b512", "b1428x3", "mib", "boot/x/lpx", "rollover"} {
			if _, ok := files[name]; !ok || (name == "rollover" && set != "plain") {
				continue
			}
			t.Run(set+"/"+name, func(t *testing.T) {
				local := filepath.Join(out, set+"_"+strings.ReplaceAll(name, "/", "_"))
				args := append([]string{"--get", "-r", name, "-l", local}, opts...)
				args = append(args, "127.0.0.1", port)
				if o, err := runPeer(t, out, bin, args...); err != nil {
					t.Fatalf("atftp: %v: %s", err, o)
				}
				if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, files[name]) {
					t.Fatalf("%d bytes, %v; want %d, contents equal", len(got), err, len(files[name]))
				}
			})
		}
	}
	t.Run("traversal", func(t *testing.T) {
		o, err := runPeer(t, out, bin, "--get", "-r", "/../etc/passwd", "-l", filepath.Join(out, "refused"), "127.0.0.1", port)
		if err == nil || !strings.Contains(strings.ToLower(o), "access violation") {
			t.Fatalf("atftp: %v: %q, want an access violation", err, o)
		}
	})
}
