package netboot

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://192.0.2.1:8080"+path, nil)
	r.RemoteAddr = "192.0.2.23:40000"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHTTPServesTheBootPath(t *testing.T) {
	f := newFixture(t, nil)
	const mac = "52:54:00:12:34:56"
	f.put(t, f.ramdiskConfig("node-1", IPXE, UEFI, mac))
	h := f.srv.Handler()

	w := get(t, h, http.MethodGet, "/boot/52-54-00-12-34-56/boot.ipxe")
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), "#!ipxe\n") {
		t.Fatalf("script: %d %q", w.Code, w.Body.String())
	}
	golden(t, "ipxe-ramdisk-uefi.ipxe", w.Body.Bytes())

	w = get(t, h, http.MethodGet, "/boot/52-54-00-12-34-56/kernel")
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), pattern(10000)) {
		t.Fatalf("kernel: %d, %d bytes", w.Code, w.Body.Len())
	}
	// Range requests, as iPXE and UEFI HTTP boot send them.
	w = get(t, h, http.MethodGet, "/boot/52-54-00-12-34-56/ramdisk", "Range", "bytes=0-99")
	if w.Code != http.StatusPartialContent || !bytes.Equal(w.Body.Bytes(), pattern(300000)[:100]) ||
		w.Header().Get("Content-Range") != "bytes 0-99/300000" {
		t.Fatalf("range 0-99: %d %q, %d bytes", w.Code, w.Header().Get("Content-Range"), w.Body.Len())
	}
	w = get(t, h, http.MethodGet, "/boot/52-54-00-12-34-56/ramdisk", "Range", "bytes=299990-")
	if w.Code != http.StatusPartialContent || !bytes.Equal(w.Body.Bytes(), pattern(300000)[299990:]) {
		t.Fatalf("range 299990-: %d, %d bytes", w.Code, w.Body.Len())
	}
	w = get(t, h, http.MethodGet, "/boot/52-54-00-12-34-56/ramdisk", "Range", "bytes=400000-")
	if w.Code != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("range beyond the end: %d", w.Code)
	}
	w = get(t, h, http.MethodHead, "/boot/52-54-00-12-34-56/ramdisk")
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "300000" {
		t.Fatalf("HEAD: %d, %d bytes, length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
	w = get(t, h, http.MethodGet, "/ipxe/snponly.efi")
	if w.Code != http.StatusOK || w.Body.String() != "snponly.efi\n" {
		t.Fatalf("snponly.efi: %d %q", w.Code, w.Body.String())
	}
	w = get(t, h, http.MethodGet, "/boot.ipxe")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "${netX/mac:hexhyp}") {
		t.Fatalf("generic script: %d %q", w.Code, w.Body.String())
	}

	recs := f.rec.Records()
	if got, want := stages(recs), "boot prepared,boot script,kernel,ramdisk,ramdisk,http file,http file"; got != want {
		t.Fatalf("stages %s, want %s (HEAD and refused ranges record nothing)", got, want)
	}
	for _, r := range recs[1:5] {
		if r.Node != "node-1" || r.MAC != mac || r.Addr != "192.0.2.23" || !r.At.Equal(testTime) {
			t.Errorf("record %+v: want node-1, %s, 192.0.2.23", r, mac)
		}
	}
	if recs[2].Bytes != 10000 || recs[2].File != "/boot/52-54-00-12-34-56/kernel" {
		t.Errorf("kernel record %+v: want 10000 bytes", recs[2])
	}
	if recs[3].Bytes != 100 || recs[4].Bytes != 10 {
		t.Errorf("range records: %d and %d bytes, want 100 and 10", recs[3].Bytes, recs[4].Bytes)
	}
}

func TestHTTPRefuses(t *testing.T) {
	f := newFixture(t, nil)
	f.put(t, f.ramdiskConfig("node-1", IPXE, UEFI, "52:54:00:12:34:56"))
	url := f.ramdiskConfig("node-2", IPXE, UEFI, "52:54:00:12:34:57")
	url.Kernel, url.Ramdisk = "http://192.0.2.9/k", "http://192.0.2.9/r"
	f.put(t, url)
	h := f.srv.Handler()
	tests := []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, "/boot/52-54-00-12-34-56/boot.ipxe", http.StatusMethodNotAllowed},
		{http.MethodPut, "/boot/52-54-00-12-34-56/kernel", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/boot/", http.StatusNotFound},
		{http.MethodGet, "/ipxe/", http.StatusNotFound},
		{http.MethodGet, "/boot/52-54-00-12-34-99/boot.ipxe", http.StatusNotFound}, // unknown, no fallback
		{http.MethodGet, "/boot/52-54-00-12-34-57/kernel", http.StatusNotFound},    // a URL: not ours to serve
		{http.MethodGet, "/boot/52-54-00-12-34-56/../../../../etc/passwd", http.StatusNotFound},
		{http.MethodGet, "/boot/52-54-00-12-34-56/%2e%2e/%2e%2e/etc/passwd", http.StatusNotFound},
		{http.MethodGet, "/boot/..%2f..%2fetc%2fpasswd/kernel", http.StatusNotFound},
		{http.MethodGet, "/pxelinux.cfg/01-52-54-00-12-34-56", http.StatusNotFound}, // an ipxe node has none
		{http.MethodGet, "/grub/grub.cfg-01-52-54-00-12-34-56", http.StatusNotFound},
		{http.MethodGet, "/" + strings.Repeat("x", 300), http.StatusRequestURITooLong},
	}
	for _, tc := range tests {
		w := get(t, h, tc.method, tc.path)
		if w.Code != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.code)
		}
		if strings.Contains(w.Body.String(), "root:") {
			t.Errorf("%s %s served /etc/passwd", tc.method, tc.path)
		}
	}
	if got := stages(f.rec.Records()); got != "boot prepared,boot prepared" {
		t.Errorf("refused requests recorded stages: %s", got)
	}
}

// TestHTTPLocalAndFallbackStages: the scripts of an enrolled machine and
// of an unknown one record stage.LocalBoot and stage.Fallback.
func TestHTTPLocalAndFallbackStages(t *testing.T) {
	f := newFixture(t, func(o *Options) {
		o.Fallback = &Fallback{Kernel: "/nonexistent", Ramdisk: "http://192.0.2.1:8080/r"}
	})
	f.res.m["52:54:00:00:00:01"] = "active-node"
	h := f.srv.Handler()
	if w := get(t, h, http.MethodGet, "/boot/52-54-00-00-00-01/boot.ipxe"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "sanboot") {
		t.Fatalf("enrolled machine: %d %q", w.Code, w.Body.String())
	}
	if w := get(t, h, http.MethodGet, "/boot/52-54-00-00-00-02/boot.ipxe"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "/boot/52-54-00-00-00-02/kernel") {
		t.Fatalf("unknown machine: %d %q", w.Code, w.Body.String())
	}
	// The fallback kernel is a local path that does not exist: 404, no record.
	if w := get(t, h, http.MethodGet, "/boot/52-54-00-00-00-02/kernel"); w.Code != http.StatusNotFound {
		t.Fatalf("missing fallback kernel: %d", w.Code)
	}
	recs := f.rec.Records()
	if got := stages(recs); got != "local boot,fallback" {
		t.Fatalf("stages %s", got)
	}
	if recs[0].Node != "active-node" || recs[1].Node != "" || recs[1].MAC != "52:54:00:00:00:02" {
		t.Errorf("records %+v", recs)
	}
}

// TestHTTPDisconnectRecordsAnError: a client that goes away in the middle
// of the ramdisk leaves a Ramdisk record with the bytes sent and an
// error, over a real connection.
func TestHTTPDisconnectRecordsAnError(t *testing.T) {
	f := newFixture(t, nil)
	big := f.ramdiskConfig("node-1", IPXE, BIOS, "52:54:00:12:34:56")
	writeFile(t, f.ramdisk, pattern(32<<20))
	f.put(t, big)
	srv := httptest.NewServer(f.srv.Handler())
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /boot/52-54-00-12-34-56/ramdisk HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 64<<10)
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got *stage.Record
		for _, r := range f.rec.Records() {
			if r.Stage == stage.Ramdisk {
				got = &r
			}
		}
		if got != nil {
			if got.Err == "" || got.Bytes <= 0 || got.Bytes >= 32<<20 {
				t.Fatalf("ramdisk record %+v: want an error and a partial byte count", *got)
			}
			if !strings.Contains(got.Err, "disconnected") {
				t.Errorf("error %q", got.Err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no ramdisk record after the client went away")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAddressBookNamesTheNode: a file without a MAC in its name (the iPXE
// binary) is recorded against the node the DHCP server offered the
// client's address to.
func TestAddressBookNamesTheNode(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.ObserveBootStage(stage.Record{Node: "node-1", MAC: "52:54:00:12:34:56", Stage: stage.DHCPOffer, Addr: "192.0.2.23"})
	get(t, f.srv.Handler(), http.MethodGet, "/ipxe/ipxe.efi")
	recs := f.rec.Records()
	if got := stages(recs); got != "dhcp offer,http file" {
		t.Fatalf("stages %s", got)
	}
	if recs[1].Node != "node-1" || recs[1].MAC != "52:54:00:12:34:56" {
		t.Errorf("record %+v: want node-1's", recs[1])
	}
}

// FuzzHandler: whatever the method, path and Range header, the handler
// answers without panicking, serves only paths the layout names, and
// never anything but the configured files.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{"/boot/52-54-00-12-34-56/ramdisk", "/boot.ipxe", "/ipxe/snponly.efi", "/../etc/passwd",
		"/boot/52-54-00-12-34-56/%2e%2e/x", "/grub/grub.cfg"} {
		f.Add("GET", s, "bytes=0-99")
	}
	f.Add("HEAD", "/boot/52-54-00-12-34-56/kernel", "bytes=5-")
	f.Add("GET", "/boot/52-54-00-12-34-56/kernel", "bytes=0-1,5-9")
	fx := newFixture(f, nil)
	fx.put(f, fx.ramdiskConfig("node-1", IPXE, UEFI, "52:54:00:12:34:56"))
	h := fx.srv.Handler()
	f.Fuzz(func(t *testing.T, method, path, rng string) {
		r, err := http.NewRequest(method, "http://192.0.2.1:8080/", nil)
		if err != nil {
			return
		}
		r.URL.Path = path
		r.RemoteAddr = "192.0.2.23:40000"
		if rng != "" {
			r.Header.Set("Range", rng)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code < 300 && parsePath(path).kind == routeNone {
			t.Fatalf("%s %q: %d for a path the layout does not name", method, path, w.Code)
		}
		if bytes.Contains(w.Body.Bytes(), []byte("root:")) {
			t.Fatalf("%s %q served something outside the layout", method, path)
		}
	})
}
