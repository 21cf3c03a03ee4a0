package tftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: every
// server and transfer a test starts must stop with its context. The
// benchmark runs this binary as its server and client parties too.
func TestMain(m *testing.M) {
	if benchmarkRole() {
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// memFS is a Handler over files in memory that counts its calls.
type memFS struct {
	mu    sync.Mutex
	files map[string][]byte
	calls atomic.Int64
}

func newMemFS(files map[string][]byte) *memFS { return &memFS{files: files} }

func (m *memFS) OpenTFTP(_ context.Context, r *Request) (File, error) {
	m.calls.Add(1)
	m.mu.Lock()
	b, ok := m.files[r.Filename]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, r.Filename)
	}
	return memFile{bytes.NewReader(b)}, nil
}

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// pattern returns n deterministic bytes that differ from block to block
// (so a block sent twice or out of order is caught) and include CR, LF
// and NUL.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// started is a server running on 127.0.0.1 for one test.
type started struct {
	addr   string
	ap     netip.AddrPort
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	mu     sync.Mutex
	log    []Transfer
}

// start runs s on an ephemeral port of 127.0.0.1 until the test ends (or
// stop is called), and records its OnTransfer reports.
func start(t testing.TB, s *Server) *started { t.Helper(); return startOn(t, s, "127.0.0.1:0") }

// startOn is start on addr.
func startOn(t testing.TB, s *Server, addr string) *started {
	t.Helper()
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	st := &started{addr: conn.LocalAddr().String(), done: make(chan error, 1)}
	st.ap = conn.LocalAddr().(*net.UDPAddr).AddrPort()
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	user := s.OnTransfer
	s.OnTransfer = func(tr Transfer) {
		st.mu.Lock()
		st.log = append(st.log, tr)
		st.mu.Unlock()
		if user != nil {
			user(tr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	st.cancel = cancel
	go func() { st.done <- s.Serve(ctx, conn) }()
	t.Cleanup(func() {
		st.stop(t)
		conn.Close()
	})
	return st
}

func (st *started) stop(t testing.TB) {
	t.Helper()
	st.once.Do(func() {
		st.cancel()
		select {
		case err := <-st.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return 5 s after its context ended")
		}
	})
}

// transfers waits until n transfers were reported and returns them.
func (st *started) transfers(t testing.TB, n int) []Transfer {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st.mu.Lock()
		got := append([]Transfer(nil), st.log...)
		st.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transfers reported, want %d", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// raw is a hand-driven client socket: the tests build its packets byte by
// byte, independent of the package's encoders.
type raw struct {
	t    testing.TB
	conn *net.UDPConn
}

func newRaw(t testing.TB) *raw { t.Helper(); return newRawOn(t, 1) }

// newRawOn is a raw client on 127.0.0.host: a machine of its own (every
// 127/8 address is on lo on Linux).
func newRawOn(t testing.TB, host byte) *raw {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, host)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, conn: c}
}

func (r *raw) send(to netip.AddrPort, p []byte) {
	r.t.Helper()
	if _, err := r.conn.WriteToUDPAddrPort(p, to); err != nil {
		r.t.Fatal(err)
	}
}

// recv returns the next packet within d, or fails the test.
func (r *raw) recv(d time.Duration) ([]byte, netip.AddrPort) {
	r.t.Helper()
	p, from, ok := r.tryRecv(d)
	if !ok {
		r.t.Fatalf("no packet within %v", d)
	}
	return p, from
}

// tryRecv returns the next packet within d, or ok false.
func (r *raw) tryRecv(d time.Duration) ([]byte, netip.AddrPort, bool) {
	_ = r.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 70000)
	n, from, err := r.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, netip.AddrPort{}, false
		}
		r.t.Fatal(err)
	}
	return buf[:n], from, true
}

// rrq builds a read request: filename, mode, then option name/value pairs.
func rrq(op uint16, fields ...string) []byte {
	b := []byte{byte(op >> 8), byte(op)}
	for _, f := range fields {
		b = append(append(b, f...), 0)
	}
	return b
}

func ack(n uint16) []byte { return []byte{0, 4, byte(n >> 8), byte(n)} }

func op(p []byte) uint16 {
	if len(p) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func blockOf(p []byte) uint16 { return binary.BigEndian.Uint16(p[2:]) }

// wantError checks p is an ERROR packet with code.
func wantError(t testing.TB, p []byte, code ErrorCode) {
	t.Helper()
	if op(p) != opERROR || len(p) < 5 {
		t.Fatalf("packet % x is not an ERROR", p)
	}
	if got := ErrorCode(binary.BigEndian.Uint16(p[2:])); got != code {
		t.Fatalf("ERROR code %d (%q), want %d", got, p[4:len(p)-1], code)
	}
}

// oackOptions parses an OACK packet into its options.
func oackOptions(t testing.TB, p []byte) map[string]string {
	t.Helper()
	if op(p) != opOACK {
		t.Fatalf("packet % x is not an OACK", p[:min(len(p), 16)])
	}
	fields := bytes.Split(p[2:len(p)-1], []byte{0})
	got := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		got[string(fields[i])] = string(fields[i+1])
	}
	return got
}
