package imagecache_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/imagecache/oci"
	"github.com/anvilmetal/anvil/imagecache/oci/ocitest"
)

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// origin serves files and counts GETs per path; a gate, when set, holds
// every GET until closed.
type origin struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	gets  map[string]int
	gate  chan struct{}
}

func newOrigin(t *testing.T) *origin {
	o := &origin{files: map[string][]byte{}, gets: map[string]int{}}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		b, ok := o.files[r.URL.Path]
		o.gets[r.URL.Path]++
		gate := o.gate
		o.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) put(p string, b []byte) string {
	o.mu.Lock()
	o.files[p] = b
	o.mu.Unlock()
	return o.srv.URL + p
}

func (o *origin) count(p string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gets[p]
}

// served is the image's bytes through the cache's handler.
func served(t *testing.T, h http.Handler, u string) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
	return rec.Code, rec.Body.Bytes()
}

func newCache(t *testing.T, o imagecache.Options) *imagecache.Cache {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	o.URLBase = "http://conductor.test/images/"
	c, err := imagecache.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestOneDownloadForConcurrentNodes: ten nodes ask for one image at
// once; the origin sees one GET, every node gets its own URL serving
// the verified bytes, and a released URL stops working.
func TestOneDownloadForConcurrentNodes(t *testing.T) {
	o := newOrigin(t)
	img := bytes.Repeat([]byte("disk image "), 100000)
	src := o.put("/disk.raw", img)
	o.gate = make(chan struct{})
	c := newCache(t, imagecache.Options{})
	h := c.Handler()
	const nodes = 10
	var wg sync.WaitGroup
	got := make([]imagecache.NodeImage, nodes)
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = c.NodeImage(context.Background(), fmt.Sprintf("node-%d", i), imagecache.Request{Source: src, Checksum: sum256(img)})
		}()
	}
	// Let every request join the download before the origin answers.
	deadline := time.Now().Add(10 * time.Second)
	for o.count("/disk.raw") == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(o.gate)
	wg.Wait()
	urls := map[string]bool{}
	for i := range nodes {
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
		n := got[i]
		if urls[n.URL] || !strings.HasPrefix(n.URL, "http://conductor.test/images/") || len(strings.TrimPrefix(n.URL, "http://conductor.test/images/")) < 40 {
			t.Fatalf("node %d URL %q: want a distinct unguessable URL", i, n.URL)
		}
		urls[n.URL] = true
		if n.HashAlgo != "sha256" || n.HashValue != sum256(img) || n.Size != int64(len(img)) || n.DiskFormat != "raw" {
			t.Fatalf("node %d image %+v", i, n)
		}
	}
	if g := o.count("/disk.raw"); g != 1 {
		t.Fatalf("origin GETs %d, want 1", g)
	}
	if st := c.Stats(); st.Downloads != 1 || st.OriginBytes != int64(len(img)) || st.Hits != nodes-1 {
		t.Fatalf("stats %+v", st)
	}
	code, body := served(t, h, got[3].URL)
	if code != http.StatusOK || !bytes.Equal(body, img) {
		t.Fatalf("served %d, %d bytes", code, len(body))
	}
	// Range requests (IPA resumes downloads).
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, got[3].URL, nil)
	req.Header.Set("Range", "bytes=5-14")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusPartialContent || rec.Body.String() != string(img[5:15]) {
		t.Fatalf("range: %d %q", rec.Code, rec.Body.String())
	}
	if code, _ := served(t, h, "http://conductor.test/images/not-a-token"); code != http.StatusNotFound {
		t.Fatalf("unknown token: %d", code)
	}
	if c.Holds("node-3") != nodes {
		t.Fatalf("holds %d, want %d", c.Holds("node-3"), nodes)
	}
	c.ReleaseNode("node-3")
	c.ReleaseNode("node-3")
	if code, _ := served(t, h, got[3].URL); code != http.StatusNotFound {
		t.Fatalf("released URL: %d, want 404", code)
	}
	if c.Holds("node-4") != nodes-1 {
		t.Fatalf("holds after release %d", c.Holds("node-4"))
	}
	// A second request for a node replaces its URL.
	again, err := c.NodeImage(context.Background(), "node-4", imagecache.Request{Source: src, Checksum: sum256(img)})
	if err != nil || again.URL == got[4].URL {
		t.Fatalf("again: %+v %v", again, err)
	}
	if code, _ := served(t, h, got[4].URL); code != http.StatusNotFound {
		t.Fatalf("replaced URL: %d", code)
	}
	if o.count("/disk.raw") != 1 {
		t.Fatalf("origin GETs %d after the hits", o.count("/disk.raw"))
	}
}

// TestFailedDownloadFailsEveryWaiter: a checksum mismatch fails all the
// nodes waiting with the cause, and the next request downloads again.
func TestFailedDownloadFailsEveryWaiter(t *testing.T) {
	o := newOrigin(t)
	img := []byte("the bytes")
	src := o.put("/disk.raw", img)
	o.gate = make(chan struct{})
	c := newCache(t, imagecache.Options{})
	wrong := strings.Repeat("0", 64)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.NodeImage(context.Background(), fmt.Sprint("n", i), imagecache.Request{Source: src, Checksum: wrong})
		}()
	}
	for o.count("/disk.raw") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(o.gate)
	wg.Wait()
	for i, err := range errs {
		var ce *imagecache.Error
		if !errors.Is(err, imagecache.ErrChecksum) || !errors.As(err, &ce) || !strings.Contains(err.Error(), sum256(img)) {
			t.Fatalf("waiter %d: %v, want ErrChecksum with the actual digest", i, err)
		}
	}
	if o.count("/disk.raw") != 1 {
		t.Fatalf("origin GETs %d, want 1", o.count("/disk.raw"))
	}
	if _, err := c.NodeImage(context.Background(), "n9", imagecache.Request{Source: src, Checksum: sum256(img)}); err != nil {
		t.Fatal(err)
	}
	if o.count("/disk.raw") != 2 {
		t.Fatalf("the retry did not download again: %d GETs", o.count("/disk.raw"))
	}
}

func TestBoundsAndRefusals(t *testing.T) {
	o := newOrigin(t)
	img := bytes.Repeat([]byte{1}, 4096)
	src := o.put("/big.raw", img)
	ctx := context.Background()
	small := newCache(t, imagecache.Options{MaxImageBytes: 1000})
	if _, err := small.NodeImage(ctx, "n", imagecache.Request{Source: src, Checksum: sum256(img)}); !errors.Is(err, imagecache.ErrDownload) || !strings.Contains(err.Error(), "more than 1000") {
		t.Fatalf("size bound: %v", err)
	}
	c := newCache(t, imagecache.Options{})
	tests := []struct {
		req  imagecache.Request
		want error
		text string
	}{
		{imagecache.Request{Source: "ftp://x/y", Checksum: sum256(img)}, imagecache.ErrInvalidSource, "http(s):// or oci://"},
		{imagecache.Request{Source: src}, imagecache.ErrInvalidSource, "no image_checksum"},
		{imagecache.Request{Source: src, Checksum: "abc"}, imagecache.ErrInvalidSource, "hex digest"},
		{imagecache.Request{Source: src, Checksum: strings.Repeat("a", 32)}, imagecache.ErrInvalidSource, "md5"},
		{imagecache.Request{Source: o.srv.URL + "/missing", Checksum: sum256(img)}, imagecache.ErrDownload, "404"},
		{imagecache.Request{Source: src, HashAlgo: "crc32", HashValue: "1"}, imagecache.ErrInvalidSource, "image_os_hash_algo"},
	}
	for _, tc := range tests {
		if _, err := c.NodeImage(ctx, "n", tc.req); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%+v: %v, want %v with %q", tc.req, err, tc.want, tc.text)
		}
	}
	// The time bound: an origin that never answers.
	o.gate = make(chan struct{})
	defer close(o.gate)
	slow := newCache(t, imagecache.Options{FetchTimeout: 200 * time.Millisecond})
	if _, err := slow.NodeImage(ctx, "n", imagecache.Request{Source: src, Checksum: sum256(img)}); !errors.Is(err, imagecache.ErrDownload) || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("time bound: %v", err)
	}
	// A waiter's own context ends its wait, not the download.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.NodeImage(wctx, "n", imagecache.Request{Source: src, HashAlgo: "sha512", HashValue: strings.Repeat("a", 128)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter deadline: %v", err)
	}
}

// TestChecksumFile: image_checksum may be the URL of a checksum file.
func TestChecksumFile(t *testing.T) {
	o := newOrigin(t)
	img := []byte("image behind a checksum file")
	src := o.put("/images/disk.img", img)
	sums := o.put("/images/SHA256SUMS", []byte(strings.Repeat("f", 64)+"  other.img\n"+sum256(img)+" *disk.img\n"))
	c := newCache(t, imagecache.Options{})
	n, err := c.NodeImage(context.Background(), "n", imagecache.Request{Source: src, Checksum: sums})
	if err != nil || n.Origin != "sha256:"+sum256(img) {
		t.Fatalf("%+v %v", n, err)
	}
}

// TestCleanUp: unused images past the TTL go; then the least recently
// used unused ones while the cache is too big; held images stay.
func TestCleanUp(t *testing.T) {
	o := newOrigin(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	advance := func(d time.Duration) { now.Add(int64(d)) }
	dir := t.TempDir()
	c := newCache(t, imagecache.Options{Dir: dir, MaxBytes: 2500, TTL: time.Hour, Now: clock})
	ctx := context.Background()
	imgs := map[string][]byte{}
	get := func(node, name string) {
		t.Helper()
		if _, ok := imgs[name]; !ok {
			imgs[name] = bytes.Repeat([]byte(name), 1000/len(name))
			o.put("/"+name, imgs[name])
		}
		if _, err := c.NodeImage(ctx, node, imagecache.Request{Source: o.srv.URL + "/" + name, Checksum: sum256(imgs[name])}); err != nil {
			t.Fatal(err)
		}
	}
	files := func() int {
		des, _ := os.ReadDir(dir)
		return len(des) / 2 // image and metadata
	}
	get("n1", "a")
	advance(time.Minute)
	get("n2", "b")
	advance(time.Minute)
	c.ReleaseNode("n1")
	c.ReleaseNode("n2")
	advance(time.Minute)
	get("n3", "c") // three images of ~1000 bytes: over 2500, "a" (oldest unused) goes
	if files() != 2 || c.Stats().Evictions != 1 {
		t.Fatalf("after c: %d images, %d evictions", files(), c.Stats().Evictions)
	}
	get("n1", "a") // downloaded again
	if o.count("/a") != 2 {
		t.Fatalf("a downloaded %d times", o.count("/a"))
	}
	// b is the only unused one and goes; a and c are held.
	if files() != 2 {
		t.Fatalf("after a again: %d images", files())
	}
	get("n4", "d") // over size, but all held: nothing goes
	if files() != 3 {
		t.Fatalf("held images removed: %d left", files())
	}
	c.ReleaseNode("n1")
	c.ReleaseNode("n3")
	c.ReleaseNode("n4")
	advance(2 * time.Hour) // past the TTL: all unused go
	c.CleanUp()
	if files() != 0 {
		t.Fatalf("after the TTL: %d images", files())
	}
	// Disk pressure: before a download, unused images are removed to
	// make room, and a download that cannot fit fails.
	get("n5", "e")
	c.ReleaseNode("n5")
	c.SetFreeSpace(func() (int64, error) {
		des, _ := os.ReadDir(dir)
		return 1500 - int64(len(des)/2)*1000, nil // one image's room with e gone
	})
	get("n6", "f")
	if files() != 1 {
		t.Fatalf("under pressure: %d images, want f alone", files())
	}
	c.SetFreeSpace(func() (int64, error) { return 10, nil })
	big := []byte(strings.Repeat("g", 900))
	o.put("/g", big)
	if _, err := c.NodeImage(ctx, "n7", imagecache.Request{Source: o.srv.URL + "/g", Checksum: sum256(big)}); !errors.Is(err, imagecache.ErrNoSpace) {
		t.Fatalf("no space: %v", err)
	}
}

// TestReopen: a new Cache on the directory keeps the complete images.
func TestReopen(t *testing.T) {
	o := newOrigin(t)
	img := []byte("persisted")
	src := o.put("/p", img)
	dir := t.TempDir()
	c := newCache(t, imagecache.Options{Dir: dir})
	if _, err := c.NodeImage(context.Background(), "n", imagecache.Request{Source: src, Checksum: sum256(img)}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := os.WriteFile(filepath.Join(dir, "junk.part"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := newCache(t, imagecache.Options{Dir: dir})
	n, err := c2.NodeImage(context.Background(), "n", imagecache.Request{Source: src, Checksum: sum256(img)})
	if err != nil || o.count("/p") != 1 {
		t.Fatalf("reopened: %+v %v, %d GETs", n, err, o.count("/p"))
	}
	if _, err := os.Stat(filepath.Join(dir, "junk.part")); !os.IsNotExist(err) {
		t.Fatalf("partial file kept: %v", err)
	}
}

// qcow2 makes a qcow2 image of raw with qemu-img.
func qcow2(t *testing.T, raw []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils): conversion test skipped")
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit not installed (Debian package util-linux): conversion test skipped")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.raw"), filepath.Join(dir, "out.qcow2")
	if err := os.WriteFile(in, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", in, out).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestForceRaw: a qcow2 image is converted to raw under qemu-img's
// limits; the served checksum is the raw file's; a qcow2 naming a
// backing file is refused before qemu-img runs.
func TestForceRaw(t *testing.T) {
	raw := make([]byte, 3<<20)
	copy(raw[512:], "partition data")
	copy(raw[2<<20:], "more data")
	q := qcow2(t, raw)
	o := newOrigin(t)
	src := o.put("/disk.qcow2", q)
	c := newCache(t, imagecache.Options{})
	n, err := c.NodeImage(context.Background(), "n", imagecache.Request{Source: src, Checksum: sum256(q), ForceRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	if n.DiskFormat != "raw" || n.HashValue != sum256(raw) || n.Size != int64(len(raw)) || c.Stats().Conversions != 1 {
		t.Fatalf("converted %+v (stats %+v), want raw %s", n, c.Stats(), sum256(raw))
	}
	_, body := served(t, c.Handler(), n.URL)
	if !bytes.Equal(body, raw) {
		t.Fatal("the served image is not the raw disk")
	}
	// Without force_raw the qcow2 is served as it came.
	n2, err := c.NodeImage(context.Background(), "n2", imagecache.Request{Source: src, Checksum: sum256(q)})
	if err != nil || n2.DiskFormat != "qcow2" || n2.HashValue != sum256(q) {
		t.Fatalf("unconverted %+v %v", n2, err)
	}
	// A backing file.
	bad := append([]byte(nil), q...)
	binary.BigEndian.PutUint64(bad[8:16], 512)
	src = o.put("/backed.qcow2", bad)
	if _, err := c.NodeImage(context.Background(), "n3", imagecache.Request{Source: src, Checksum: sum256(bad), ForceRaw: true}); !errors.Is(err, imagecache.ErrFormat) || !strings.Contains(err.Error(), "backing file") {
		t.Fatalf("backing file: %v", err)
	}
	// A format not permitted.
	vmdk := append([]byte("KDMV"), make([]byte, 1000)...)
	src = o.put("/disk.vmdk", vmdk)
	if _, err := c.NodeImage(context.Background(), "n4", imagecache.Request{Source: src, Checksum: sum256(vmdk)}); !errors.Is(err, imagecache.ErrFormat) || !strings.Contains(err.Error(), "vmdk") {
		t.Fatalf("vmdk: %v", err)
	}
	// The memory limit is enforced: qemu-img cannot start in 1 MiB.
	tight := newCache(t, imagecache.Options{ConvertMemory: 1 << 20, ConvertAttempts: 2})
	src = o.put("/disk2.qcow2", q)
	if _, err := tight.NodeImage(context.Background(), "n", imagecache.Request{Source: src, Checksum: sum256(q), ForceRaw: true}); !errors.Is(err, imagecache.ErrConvert) {
		t.Fatalf("memory limit: %v", err)
	}
}

// TestOCIThroughTheCache: an oci:// image from the real registry is
// downloaded once for two nodes (the registry's access log), verified
// against its digest, its gzip layer decompressed.
func TestOCIThroughTheCache(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{Auth: ocitest.Token, Username: "u", Password: "p", PreSharedToken: "node-secret"})
	ctx := context.Background()
	img := bytes.Repeat([]byte("oci disk "), 50000)
	var gz bytes.Buffer
	zw := gzipWriter(&gz)
	_, _ = zw.Write(img)
	_ = zw.Close()
	m, blob, err := reg.PushArtifact(ctx, "disks/os", "", ocitest.Layer{Content: gz.Bytes(), MediaType: "application/vnd.oci.image.layer.v1.tar+gzip"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m.Annotations = map[string]string{oci.DiskTypeAnnotation: "raw"}
	m.Platform = &ocitest.Platform{Architecture: "amd64", OS: "linux"}
	if _, err := reg.PushIndex(ctx, "disks/os", "v1", []ocitest.Descriptor{m}, false); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, imagecache.Options{OCI: oci.NewResolver(oci.Options{PermitHTTPFallback: true})})
	req := imagecache.Request{Source: "oci://" + reg.Host + "/disks/os:v1", CPUArch: "x86_64", PullSecret: "node-secret"}
	var nodes [2]imagecache.NodeImage
	for i := range nodes {
		if nodes[i], err = c.NodeImage(ctx, fmt.Sprint("node-", i), req); err != nil {
			t.Fatal(err)
		}
	}
	if nodes[0].Origin != blob.Digest || nodes[0].HashValue != sum256(img) || nodes[0].DiskFormat != "raw" {
		t.Fatalf("image %+v, want origin %s and the decompressed disk", nodes[0], blob.Digest)
	}
	if n, b := reg.BlobDownloads("disks/os", blob.Digest); n != 1 || b != blob.Size {
		t.Fatalf("registry blob downloads %d (%d bytes), want 1 of %d bytes", n, b, blob.Size)
	}
	_, body := served(t, c.Handler(), nodes[1].URL)
	if !bytes.Equal(body, img) {
		t.Fatal("served bytes differ")
	}
	// Without the secret the registry refuses.
	req.PullSecret = ""
	if _, err := c.NodeImage(ctx, "node-x", req); !errors.Is(err, oci.ErrAuthentication) {
		t.Fatalf("no secret: %v", err)
	}
}

func gzipWriter(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }
