package tftp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeServer is a hand-driven server double for the client: it takes the
// RRQ on its socket and answers from a second one (the transfer's TID).
type fakeServer struct {
	listen, tid *raw
	client      netip.AddrPort
}

func newFakeServer(t *testing.T) *fakeServer {
	return &fakeServer{listen: newRaw(t), tid: newRaw(t)}
}

func (f *fakeServer) addr() string { return f.listen.conn.LocalAddr().String() }

// request waits for the RRQ and returns its fields.
func (f *fakeServer) request(t *testing.T) []string {
	t.Helper()
	p, from := f.listen.recv(2 * time.Second)
	f.client = from
	return strings.Split(string(p[2:len(p)-1]), "\x00")
}

func (f *fakeServer) send(p []byte) { f.tid.send(f.client, p) }

func data(block uint16, b []byte) []byte {
	return append([]byte{0, 3, byte(block >> 8), byte(block)}, b...)
}

// expectACK waits for the client's ACK of block.
func (f *fakeServer) expectACK(t *testing.T, block uint16) {
	t.Helper()
	p, _ := f.tid.recv(2 * time.Second)
	if op(p) != opACK || blockOf(p) != block {
		t.Fatalf("client sent % x, want ACK %d", p, block)
	}
}

// getAsync runs Get in the background.
func getAsync(server string, o ClientOptions) (<-chan error, *bytes.Buffer) {
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := Get(context.Background(), server, "f", o, &buf)
		done <- err
	}()
	return done, &buf
}

// TestClientWindowGap: a block missing from a window makes the client
// acknowledge the last block it has, once, and take the rest again.
func TestClientWindowGap(t *testing.T) {
	f := newFakeServer(t)
	done, buf := getAsync(f.addr(), ClientOptions{BlockSize: 8, WindowSize: 4})
	if got := f.request(t); strings.Join(got, ",") != "f,octet,blksize,8,windowsize,4" {
		t.Fatalf("RRQ fields %q", got)
	}
	f.send(append([]byte{0, 6}, "blksize\x008\x00windowsize\x004\x00"...))
	f.expectACK(t, 0)
	blocks := [][]byte{[]byte("aaaaaaaa"), []byte("bbbbbbbb"), []byte("cccccccc"), []byte("dddddddd"), []byte("e")}
	f.send(data(1, blocks[0]))
	f.send(data(2, blocks[1]))
	f.send(data(4, blocks[3])) // 3 lost
	f.expectACK(t, 2)
	f.send(data(5, blocks[4])) // the rest of the old window: no second ACK
	if p, _, ok := f.tid.tryRecv(100 * time.Millisecond); ok {
		t.Fatalf("client answered a second out-of-order block with % x", p)
	}
	for i := 2; i < 5; i++ {
		f.send(data(uint16(i+1), blocks[i]))
	}
	f.expectACK(t, 5)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := bytes.Join(blocks, nil); !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got %q, want %q", buf.Bytes(), want)
	}
}

// TestClientDuplicate: in lock step a block received again (our ACK was
// lost) is acknowledged again and not written twice.
func TestClientDuplicate(t *testing.T) {
	f := newFakeServer(t)
	done, buf := getAsync(f.addr(), ClientOptions{})
	f.request(t)
	block := bytes.Repeat([]byte("x"), 512)
	f.send(data(1, block))
	f.expectACK(t, 1)
	f.send(data(1, block))
	f.expectACK(t, 1)
	f.send(data(2, []byte("end")))
	f.expectACK(t, 2)
	if err := <-done; err != nil || buf.Len() != 515 {
		t.Fatalf("Get: %v, %d bytes, want 515", err, buf.Len())
	}
}

// TestClientWrongTID: a packet from another port gets error 5 and is
// not taken as data.
func TestClientWrongTID(t *testing.T) {
	f := newFakeServer(t)
	done, buf := getAsync(f.addr(), ClientOptions{})
	f.request(t)
	f.send(data(1, bytes.Repeat([]byte("a"), 512)))
	f.expectACK(t, 1)
	intruder := newRaw(t)
	intruder.send(f.client, data(2, []byte("evil")))
	p, _ := intruder.recv(2 * time.Second)
	wantError(t, p, ErrCodeUnknownTID)
	f.send(data(2, []byte("good")))
	f.expectACK(t, 2)
	if err := <-done; err != nil || !strings.HasSuffix(buf.String(), "good") {
		t.Fatalf("Get: %v, %q", err, buf.String()[512:])
	}
}

// TestClientBadOACK: an OACK granting more than was asked, or an option
// never asked for, is refused with error 8.
func TestClientBadOACK(t *testing.T) {
	for name, oack := range map[string]string{
		"blksize-larger":   "blksize\x009000\x00",
		"window-unasked":   "windowsize\x004\x00",
		"timeout-changed":  "timeout\x009\x00",
		"tsize-not-number": "tsize\x00x\x00",
		"unknown":          "multicast\x00\x00",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer(t)
			done, _ := getAsync(f.addr(), ClientOptions{BlockSize: 1024, TSize: true, TimeoutOption: 2})
			f.request(t)
			f.send(append([]byte{0, 6}, oack...))
			p, _ := f.tid.recv(2 * time.Second)
			wantError(t, p, ErrCodeOptionRefused)
			if err := <-done; err == nil {
				t.Fatal("Get accepted the OACK")
			}
		})
	}
}

// TestClientRetransmits: the client sends its request (and then its
// last ACK) again when the server is silent, and gives up after Retries.
func TestClientRetransmits(t *testing.T) {
	f := newFakeServer(t)
	began := time.Now()
	done, _ := getAsync(f.addr(), ClientOptions{Timeout: 30 * time.Millisecond, Retries: 2})
	for range 3 {
		f.listen.recv(2 * time.Second)
	}
	err := <-done
	if !errors.Is(err, errTimeout) || time.Since(began) > 2*time.Second {
		t.Fatalf("Get: %v after %v, want a timeout", err, time.Since(began))
	}
}

// TestListenAndServe serves on an address it listens on itself and
// stops with the context; a bad address or a nil Handler is an error.
func TestListenAndServe(t *testing.T) {
	// Find a free port, then let ListenAndServe take it.
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := &Server{Handler: newMemFS(map[string][]byte{"f": []byte("hello")})}
	go func() { done <- srv.ListenAndServe(ctx, addr) }()
	var buf bytes.Buffer
	var getErr error
	for range 50 { // until it listens
		if _, getErr = Get(ctx, addr, "f", ClientOptions{Timeout: 50 * time.Millisecond, Retries: 1}, &buf); getErr == nil {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	if getErr != nil || buf.String() != "hello" {
		t.Fatalf("Get: %v, %q", getErr, buf.String())
	}
	if err := srv.ListenAndServe(context.Background(), "127.0.0.1:notaport"); err == nil {
		t.Error("a bad address was accepted")
	}
	if err := (&Server{}).ListenAndServe(context.Background(), "127.0.0.1:0"); err == nil {
		t.Error("a nil Handler was accepted")
	}
}

// TestIPv6 runs a transfer over ::1.
func TestIPv6(t *testing.T) {
	conn, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Skipf("ipv6: no ::1 here: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	data := pattern(5000, 1)
	srv := &Server{Handler: newMemFS(map[string][]byte{"f": data})}
	go func() { done <- srv.Serve(ctx, conn) }()
	port := strconv.Itoa(conn.LocalAddr().(*net.UDPAddr).Port)
	var buf bytes.Buffer
	_, err = Get(ctx, "[::1]:"+port, "f", ClientOptions{BlockSize: 1000, WindowSize: 2}, &buf)
	cancel()
	if serr := <-done; serr != nil {
		t.Errorf("Serve: %v", serr)
	}
	if err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("Get: %v, %d bytes", err, buf.Len())
	}
}

// TestClientLocalAddr: the client's socket binds to LocalAddr, so the
// server sees the transfer come from that address (127.0.0.2 is on lo,
// as every 127/8 address is on Linux).
func TestClientLocalAddr(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": []byte("hello")})})
	local := netip.MustParseAddr("127.0.0.2")
	var buf bytes.Buffer
	if _, err := Get(context.Background(), st.addr, "f", ClientOptions{LocalAddr: local}, &buf); err != nil {
		t.Fatalf("Get from %v: %v", local, err)
	}
	trs := st.transfers(t, 1)
	if got := trs[0].Request.Remote.Addr(); got != local {
		t.Errorf("transfer came from %v, want %v", got, local)
	}
}
