package tftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGetRoundTrip sends files of sizes around the block boundaries with
// each way of negotiating, and checks the bytes and the report.
func TestGetRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 511, 512, 513, 1024, 1467, 1468, 1469, 3 * 1468, 16 * 1468, 1 << 20}
	files := map[string][]byte{}
	for i, n := range sizes {
		files["f"+strconv.Itoa(n)] = pattern(n, byte(i))
	}
	st := start(t, &Server{Handler: newMemFS(files)})
	opts := []struct {
		name      string
		o         ClientOptions
		wantBlock int
	}{
		{"rfc1350", ClientOptions{}, 512},
		{"blksize1468", ClientOptions{BlockSize: 1468, TSize: true}, 1468},
		{"blksize9000-clamped", ClientOptions{BlockSize: 9000}, 1468},
		{"window16", ClientOptions{BlockSize: 1468, WindowSize: 16}, 1468},
		{"window3-blk512", ClientOptions{WindowSize: 3, TSize: true}, 512},
	}
	reports := 0
	for _, o := range opts {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/%d", o.name, n), func(t *testing.T) {
				var buf bytes.Buffer
				res, err := Get(context.Background(), st.addr, "f"+strconv.Itoa(n), o.o, &buf)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), files["f"+strconv.Itoa(n)]) || res.Bytes != int64(n) {
					t.Fatalf("got %d bytes (reported %d), want %d, equal=false", buf.Len(), res.Bytes, n)
				}
				if res.BlockSize != o.wantBlock {
					t.Errorf("block size %d, want %d", res.BlockSize, o.wantBlock)
				}
				if o.o.TSize && res.TSize != int64(n) {
					t.Errorf("tsize %d, want %d", res.TSize, n)
				}
				reports++
				tr := st.transfers(t, reports)[reports-1]
				if tr.Err != nil || tr.Bytes != int64(n) || tr.BlockSize != o.wantBlock {
					t.Errorf("report %+v, want %d bytes in blocks of %d", tr, n, o.wantBlock)
				}
			})
		}
	}
}

// TestRollover sends a file of more than 65535 blocks of 512 bytes: the
// block number wraps to 0 and the transfer goes on.
func TestRollover(t *testing.T) {
	if testing.Short() {
		t.Skip("rollover: 33 MB transfer skipped in -short mode")
	}
	const n = 65536*512 + 1000 // 65538 blocks
	data := pattern(n, 7)
	// The test is about the block number's wrap, not about giving up:
	// both ends tolerate a stall of 30 s. Under -race on a loaded
	// machine (load 40 on two cores) the client stalled past the
	// default 6 s exactly where its buffer doubled (8 and 16 MiB), and
	// both ends gave up; the buffer is sized up front too.
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"big": data}), Retries: 30})
	for _, o := range []ClientOptions{{Retries: 30}, {WindowSize: 16, Retries: 30}} {
		t.Run("window"+strconv.Itoa(max(o.WindowSize, 1)), func(t *testing.T) {
			var buf bytes.Buffer
			buf.Grow(n)
			if _, err := Get(context.Background(), st.addr, "big", o, &buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), data) {
				t.Fatalf("got %d bytes, want %d, contents differ", buf.Len(), n)
			}
		})
	}
}

// TestNegotiation checks the OACK the server sends for each request, at
// the wire level, and the first DATA block after it.
func TestNegotiation(t *testing.T) {
	data := pattern(100000, 1)
	cases := []struct {
		name   string
		srv    Server
		mode   string
		opts   []string
		want   map[string]string // nil: no OACK, DATA 1 at once
		wantBS int
	}{
		{"none", Server{}, "octet", nil, nil, 512},
		{"blksize", Server{}, "octet", []string{"blksize", "1024"}, map[string]string{"blksize": "1024"}, 1024},
		{"blksize-clamped-default", Server{}, "octet", []string{"blksize", "65464"}, map[string]string{"blksize": "1468"}, 1468},
		{"blksize-clamped-max", Server{MaxBlockSize: 8192}, "octet", []string{"blksize", "9000"}, map[string]string{"blksize": "8192"}, 8192},
		{"blksize-too-small", Server{}, "octet", []string{"blksize", "7"}, nil, 512},
		{"blksize-not-number", Server{}, "octet", []string{"blksize", "12a"}, nil, 512},
		{"blksize-8", Server{}, "octet", []string{"blksize", "8"}, map[string]string{"blksize": "8"}, 8},
		{"tsize", Server{}, "octet", []string{"tsize", "0"}, map[string]string{"tsize": "100000"}, 512},
		{"tsize-netascii", Server{}, "netascii", []string{"tsize", "0"}, nil, 512},
		{"timeout", Server{}, "octet", []string{"timeout", "3"}, map[string]string{"timeout": "3"}, 512},
		{"timeout-0", Server{}, "octet", []string{"timeout", "0"}, nil, 512},
		{"timeout-256", Server{}, "octet", []string{"timeout", "256"}, nil, 512},
		{"windowsize", Server{}, "octet", []string{"windowsize", "8"}, map[string]string{"windowsize": "8"}, 512},
		{"windowsize-clamped", Server{}, "octet", []string{"windowsize", "1000"}, map[string]string{"windowsize": "16"}, 512},
		{"windowsize-disabled", Server{MaxWindowSize: 1}, "octet", []string{"windowsize", "8"}, nil, 512},
		{"windowsize-0", Server{}, "octet", []string{"windowsize", "0"}, nil, 512},
		{"unknown-ignored", Server{}, "octet", []string{"multicast", "", "blksize", "600"}, map[string]string{"blksize": "600"}, 600},
		{"case-insensitive", Server{}, "OCTET", []string{"BlkSize", "700", "TSIZE", "0"}, map[string]string{"blksize": "700", "tsize": "100000"}, 700},
		{"all", Server{}, "octet", []string{"blksize", "1428", "tsize", "0", "timeout", "2", "windowsize", "4"},
			map[string]string{"blksize": "1428", "tsize": "100000", "timeout": "2", "windowsize": "4"}, 1428},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := c.srv
			srv.Handler = newMemFS(map[string][]byte{"f": data})
			st := start(t, &srv)
			r := newRaw(t)
			r.send(st.ap, rrq(opRRQ, append([]string{"f", c.mode}, c.opts...)...))
			p, from := r.recv(2 * time.Second)
			if from == st.ap {
				t.Fatalf("reply came from the listening port %v, not a new transfer ID", from)
			}
			if c.want != nil {
				if got := oackOptions(t, p); !maps.Equal(got, c.want) {
					t.Fatalf("OACK %v, want %v", got, c.want)
				}
				r.send(from, ack(0))
				p, _ = r.recv(2 * time.Second)
			}
			if op(p) != opDATA || blockOf(p) != 1 {
				t.Fatalf("got % x, want DATA 1", p[:min(len(p), 8)])
			}
			if len(p)-4 != c.wantBS {
				t.Fatalf("DATA 1 carries %d bytes, want the block size %d", len(p)-4, c.wantBS)
			}
			r.send(from, []byte{0, 5, 0, 0, 's', 't', 'o', 'p', 0}) // abort
		})
	}
}

// TestNegotiatedTimeout: a timeout option of 1 s replaces the server's
// 30 s, so an unacknowledged block comes again within about a second.
func TestNegotiatedTimeout(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(2000, 1)}), Timeout: 30 * time.Second})
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet", "timeout", "1"))
	p, from := r.recv(2 * time.Second)
	if oackOptions(t, p)["timeout"] != "1" {
		t.Fatal("timeout not acknowledged")
	}
	r.send(from, ack(0))
	first, _ := r.recv(2 * time.Second)
	began := time.Now()
	again, _ := r.recv(3 * time.Second)
	if waited := time.Since(began); !bytes.Equal(first, again) || waited < 800*time.Millisecond {
		t.Fatalf("block resent after %v (equal %v), want the same block after about 1 s", waited, bytes.Equal(first, again))
	}
	r.send(from, []byte{0, 5, 0, 0, 0})
}

// TestOACKRefused: a client that answers the OACK with error 8 ends the
// transfer; the server sends nothing more and reports the refusal.
func TestOACKRefused(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(2000, 1)}), Timeout: 50 * time.Millisecond})
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet", "blksize", "1024"))
	p, from := r.recv(2 * time.Second)
	oackOptions(t, p)
	r.send(from, []byte{0, 5, 0, 8, 'n', 'o', 0})
	if p, _, ok := r.tryRecv(300 * time.Millisecond); ok {
		t.Fatalf("server sent % x after the client refused the OACK", p)
	}
	tr := st.transfers(t, 1)[0]
	var re *RemoteError
	if !errors.As(tr.Err, &re) || re.Code != ErrCodeOptionRefused || re.Message != "no" {
		t.Fatalf("report error %v, want the client's error 8 \"no\"", tr.Err)
	}
}

// TestMissingFile: a name the Handler does not know is error 1.
func TestMissingFile(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{})})
	_, err := Get(context.Background(), st.addr, "nope", ClientOptions{}, &bytes.Buffer{})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != ErrCodeNotFound {
		t.Fatalf("Get: %v, want error 1", err)
	}
	if tr := st.transfers(t, 1)[0]; !errors.Is(tr.Err, ErrNotFound) || tr.Request.Filename != "nope" {
		t.Fatalf("report %+v, want ErrNotFound for \"nope\"", tr)
	}
}

// TestHandlerError: an error the Handler does not classify (or no File
// at all) is error 0 with a generic message; the detail stays in the
// server's report.
func TestHandlerError(t *testing.T) {
	h := HandlerFunc(func(_ context.Context, r *Request) (File, error) {
		if r.Filename == "nil" {
			return nil, nil
		}
		return nil, errors.New("secret disk detail")
	})
	st := start(t, &Server{Handler: h})
	for i, c := range []struct{ name, detail string }{{"x", "secret disk detail"}, {"nil", "no File"}} {
		_, err := Get(context.Background(), st.addr, c.name, ClientOptions{}, &bytes.Buffer{})
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != ErrCodeUndefined || re.Message != "server error" {
			t.Fatalf("Get(%q): %v, want error 0 \"server error\"", c.name, err)
		}
		if tr := st.transfers(t, i+1)[i]; tr.Err == nil || !strings.Contains(tr.Err.Error(), c.detail) {
			t.Fatalf("report error %v, want %q", tr.Err, c.detail)
		}
	}
}

// TestTraversalRefused: names that climb out of the root are error 2 and
// never reach the Handler.
func TestTraversalRefused(t *testing.T) {
	fs := newMemFS(map[string][]byte{"etc/passwd": []byte("x"), "x": []byte("x")})
	st := start(t, &Server{Handler: fs})
	for _, name := range []string{
		"../etc/passwd", "/../x", "a/../../x", `..\etc\passwd`, `\..\x`, `a\..\..\x`,
		"..", "a/..", "/", ".", "x\x01", `a\../b`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Get(context.Background(), st.addr, name, ClientOptions{}, &bytes.Buffer{})
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != ErrCodeAccess {
				t.Fatalf("Get(%q): %v, want error 2", name, err)
			}
		})
	}
	if n := fs.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times, want 0", n)
	}
	// The same names cleaned to something harmless are served.
	for _, name := range []string{"/x", `\x`, "./x", "//x", `etc\passwd`, "/etc//./passwd"} {
		if _, err := Get(context.Background(), st.addr, name, ClientOptions{}, &bytes.Buffer{}); err != nil {
			t.Errorf("Get(%q): %v", name, err)
		}
	}
}

// TestRefusedAtListener: write requests, malformed and oversized
// requests and unknown modes are refused with the right codes.
func TestRefusedAtListener(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": []byte("x")})})
	long := make([]byte, 600)
	for i := range long {
		long[i] = 'a'
	}
	many := []string{"f", "octet"}
	for i := range 17 {
		many = append(many, "o"+strconv.Itoa(i), "1")
	}
	cases := []struct {
		name string
		p    []byte
		code ErrorCode
	}{
		{"wrq", rrq(opWRQ, "f", "octet"), ErrCodeAccess},
		{"no-mode", rrq(opRRQ, "f"), ErrCodeIllegal},
		{"unterminated", []byte{0, 1, 'f', 0, 'o'}, ErrCodeIllegal},
		{"oversized", rrq(opRRQ, string(long), "octet"), ErrCodeIllegal},
		{"too-many-options", rrq(opRRQ, many...), ErrCodeIllegal},
		{"repeated-option", rrq(opRRQ, "f", "octet", "blksize", "1024", "BLKSIZE", "512"), ErrCodeIllegal},
		{"data-at-listener", []byte{0, 3, 0, 1, 'x'}, ErrCodeIllegal},
		{"mode-mail", rrq(opRRQ, "f", "mail"), ErrCodeIllegal},
		{"empty-name", rrq(opRRQ, "", "octet"), ErrCodeIllegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRaw(t)
			r.send(st.ap, c.p)
			p, _ := r.recv(2 * time.Second)
			wantError(t, p, c.code)
		})
	}
	for name, p := range map[string][]byte{
		"error": {0, 5, 0, 0, 'x', 0}, "one-byte": {0}, "opcode-0": {0, 0, 'x', 0}, "opcode-7": {0, 7, 'x', 0},
		"opcode-256": {1, 1, 'x', 0},
	} {
		t.Run(name+"-not-answered", func(t *testing.T) {
			r := newRaw(t)
			r.send(st.ap, p)
			if p, _, ok := r.tryRecv(200 * time.Millisecond); ok {
				t.Fatalf("server answered with % x", p)
			}
		})
	}
}

// TestConcurrent runs 100 transfers at once, each of its own file.
func TestConcurrent(t *testing.T) {
	files := map[string][]byte{}
	for i := range 100 {
		files["f"+strconv.Itoa(i)] = pattern(20000+i*997, byte(i))
	}
	st := start(t, &Server{Handler: newMemFS(files), MaxTransfers: 100})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			name := "f" + strconv.Itoa(i)
			var buf bytes.Buffer
			o := ClientOptions{BlockSize: 512 + i*9, WindowSize: i % 4, TSize: true}
			if _, err := Get(context.Background(), st.addr, name, o, &buf); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			if !bytes.Equal(buf.Bytes(), files[name]) {
				errs <- fmt.Errorf("%s: contents differ", name)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// holdSlots starts n transfers from raw clients that receive their first
// block and then stop acknowledging: each holds a transfer slot until it
// aborts.
func holdSlots(t *testing.T, st *started, n int) (holders []*raw, tids []netip.AddrPort) {
	t.Helper()
	for range n {
		r := newRaw(t)
		r.send(st.ap, rrq(opRRQ, "f", "octet"))
		p, from := r.recv(2 * time.Second)
		if op(p) != opDATA {
			t.Fatalf("got % x, want DATA 1", p[:4])
		}
		holders, tids = append(holders, r), append(tids, from)
	}
	return holders, tids
}

// TestMaxTransfers: beyond MaxTransfers a request is not answered (no
// "server busy" error, which ends a PXE ROM's boot), its retransmission
// keeps its place, and its transfer starts from a fresh port as soon as a
// slot is free; beyond MaxQueued a request is dropped, and the client's
// retry after a slot freed is served.
func TestMaxTransfers(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(5000, 1)}),
		MaxTransfers: 2, MaxQueued: 1, Timeout: time.Minute})
	holders, tids := holdSlots(t, st, 2)
	waiting := newRawOn(t, 2)
	waiting.send(st.ap, rrq(opRRQ, "f", "octet"))
	if p, _, ok := waiting.tryRecv(300 * time.Millisecond); ok {
		t.Fatalf("a request beyond MaxTransfers got % x, want no answer while it waits", p)
	}
	waiting.send(st.ap, rrq(opRRQ, "f", "octet")) // the client's retransmission
	dropped := newRawOn(t, 3)
	dropped.send(st.ap, rrq(opRRQ, "f", "octet"))
	if p, _, ok := dropped.tryRecv(300 * time.Millisecond); ok {
		t.Fatalf("a request beyond MaxQueued got % x, want no answer", p)
	}

	holders[0].send(tids[0], []byte{0, 5, 0, 0, 0}) // the first client gives up
	p, from := waiting.recv(2 * time.Second)
	if op(p) != opDATA || blockOf(p) != 1 {
		t.Fatalf("waiting client got % x, want DATA 1", p[:4])
	}
	if from == st.ap || from == tids[0] || from == tids[1] {
		t.Errorf("waiting client's transfer from %v, want a port of its own", from)
	}
	if p, _, ok := waiting.tryRecv(300 * time.Millisecond); ok {
		// The server retransmits after Timeout (a minute): anything
		// now comes from a second transfer.
		t.Errorf("waiting client got % x too, want one transfer for its retransmitted request", p[:4])
	}
	// The dropped client's retry, now that the queue has room, waits for
	// the next slot and gets it.
	dropped.send(st.ap, rrq(opRRQ, "f", "octet"))
	holders[1].send(tids[1], []byte{0, 5, 0, 0, 0})
	if p, _ := dropped.recv(2 * time.Second); op(p) != opDATA {
		t.Fatalf("retried client got % x, want DATA 1", p[:4])
	}
	st.transfers(t, 2)
}

// TestQueueRestart: a waiting client that gives up and asks again from a
// new port (firmware restarting its boot attempt) keeps its place: the
// new request is served before a later client's, and the dead one is
// not served at all.
func TestQueueRestart(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(5000, 1)}),
		MaxTransfers: 1, Timeout: time.Minute})
	holders, tids := holdSlots(t, st, 1)
	first, later := newRawOn(t, 2), newRawOn(t, 3)
	first.send(st.ap, rrq(opRRQ, "f", "octet"))
	time.Sleep(50 * time.Millisecond)
	later.send(st.ap, rrq(opRRQ, "f", "octet"))
	time.Sleep(50 * time.Millisecond)
	restarted := newRawOn(t, 2) // the same machine, a new port
	restarted.send(st.ap, rrq(opRRQ, "f", "octet"))
	time.Sleep(50 * time.Millisecond)

	holders[0].send(tids[0], []byte{0, 5, 0, 0, 0})
	p, from := restarted.recv(2 * time.Second)
	if op(p) != opDATA {
		t.Fatalf("restarted client got % x, want DATA 1 first", p[:4])
	}
	if p, _, ok := later.tryRecv(200 * time.Millisecond); ok {
		t.Fatalf("the later client got % x before the restarted one finished", p[:4])
	}
	if p, _, ok := first.tryRecv(50 * time.Millisecond); ok {
		t.Fatalf("the abandoned port got % x", p[:4])
	}
	restarted.send(from, []byte{0, 5, 0, 0, 0}) // done with it
	if p, _ := later.recv(2 * time.Second); op(p) != opDATA {
		t.Fatalf("later client got % x, want DATA 1", p[:4])
	}
}

// TestQueueTimeout: a waiting request whose client stopped sending it for
// longer than QueueTimeout is dropped when its turn comes, and the slot
// goes to the next one, whose client is still there.
func TestQueueTimeout(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(5000, 1)}),
		MaxTransfers: 1, QueueTimeout: 200 * time.Millisecond, Timeout: time.Minute})
	holders, tids := holdSlots(t, st, 1)
	gone, patient := newRawOn(t, 2), newRawOn(t, 3)
	gone.send(st.ap, rrq(opRRQ, "f", "octet"))
	patient.send(st.ap, rrq(opRRQ, "f", "octet"))
	// patient keeps sending its request, as firmware does while it
	// waits; gone does not.
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		if p, _, ok := patient.tryRecv(100 * time.Millisecond); ok {
			t.Fatalf("waiting client got % x before a slot freed", p)
		}
		patient.send(st.ap, rrq(opRRQ, "f", "octet"))
	}
	holders[0].send(tids[0], []byte{0, 5, 0, 0, 0})
	if p, _ := patient.recv(2 * time.Second); op(p) != opDATA {
		t.Fatalf("patient client got % x, want DATA 1", p[:4])
	}
	if p, _, ok := gone.tryRecv(300 * time.Millisecond); ok {
		t.Errorf("client gone for longer than QueueTimeout got % x, want nothing", p)
	}
}

// TestListenTransfer: every transfer's socket comes from ListenTransfer,
// on the address the request came to; when it fails, the transfer is
// reported failed with its error and the client gets no data.
func TestListenTransfer(t *testing.T) {
	data := pattern(3000, 4)
	var mu sync.Mutex
	var asked []netip.Addr
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": data}), ListenTransfer: func(local netip.Addr) (*net.UDPConn, error) {
		mu.Lock()
		asked = append(asked, local)
		mu.Unlock()
		return net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	}})
	var buf bytes.Buffer
	if _, err := Get(context.Background(), st.addr, "f", ClientOptions{}, &buf); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("Get returned %d bytes, want the file's %d", buf.Len(), len(data))
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	if len(got) != 1 || got[0] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("ListenTransfer asked for %v, want once for 127.0.0.1", got)
	}

	refused := errors.New("no socket in this namespace")
	st2 := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": data}), Timeout: 200 * time.Millisecond,
		ListenTransfer: func(netip.Addr) (*net.UDPConn, error) { return nil, refused }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := Get(ctx, st2.addr, "f", ClientOptions{Timeout: 300 * time.Millisecond, Retries: 1}, &bytes.Buffer{}); err == nil {
		t.Fatal("Get succeeded without a transfer socket")
	}
	if tr := st2.transfers(t, 1)[0]; !errors.Is(tr.Err, refused) {
		t.Fatalf("report %+v, want the ListenTransfer error", tr)
	}
}

// TestIPv6BlockClamp: over IPv6 the block cap is 20 bytes below
// MaxBlockSize (the IPv6 header is 40 bytes, IPv4's 20), so that the
// default block fits an MTU of 1500 unfragmented; a file round-trips.
func TestIPv6BlockClamp(t *testing.T) {
	data := pattern(5*1448+7, 3)
	for _, tc := range []struct {
		name string
		srv  Server
		ask  int
		want int
	}{
		{"default-asks-1468", Server{}, 1468, 1448},
		{"default-asks-9000", Server{}, 9000, 1448},
		{"asks-1024", Server{}, 1024, 1024},
		{"max-8192", Server{MaxBlockSize: 8192}, 9000, 8172},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.srv.Handler = newMemFS(map[string][]byte{"f": data})
			st := startOn(t, &tc.srv, "[::1]:0")
			var buf bytes.Buffer
			res, err := Get(context.Background(), st.addr, "f", ClientOptions{BlockSize: tc.ask}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if res.BlockSize != tc.want || !bytes.Equal(buf.Bytes(), data) {
				t.Errorf("block size %d (want %d), %d bytes (want %d)", res.BlockSize, tc.want, buf.Len(), len(data))
			}
		})
	}
}
