package tftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// lossyGet drives a lock-step or windowed transfer by hand, dropping the
// ACKs drop says to drop (by how many ACKs were due so far), and returns
// the bytes received.
func lossyGet(t *testing.T, server netip.AddrPort, name string, window int, drop func(nth int) bool) []byte {
	t.Helper()
	r := newRaw(t)
	if window > 1 {
		r.send(server, rrq(opRRQ, name, "octet", "windowsize", strconv.Itoa(window)))
	} else {
		r.send(server, rrq(opRRQ, name, "octet"))
	}
	var out []byte
	var expect uint16 = 1
	var tid netip.AddrPort
	due, inWin := 0, 0
	for {
		p, from := r.recv(5 * time.Second)
		tid = from
		switch op(p) {
		case opOACK:
			r.send(tid, ack(0))
			continue
		case opDATA:
		default:
			t.Fatalf("unexpected packet % x", p[:min(len(p), 8)])
		}
		if blockOf(p) != expect {
			// A retransmission: say where we are (once per window).
			if inWin == 0 || window == 1 {
				r.send(tid, ack(expect-1))
			}
			continue
		}
		out = append(out, p[4:]...)
		expect++
		inWin++
		final := len(p)-4 < 512
		if final || inWin == window {
			inWin = 0
			due++
			if !final && drop(due) {
				continue
			}
			r.send(tid, ack(expect-1))
		}
		if final {
			return out
		}
	}
}

// TestLostACK: the server sends the unacknowledged block (or window)
// again after its timeout, and the transfer completes intact.
func TestLostACK(t *testing.T) {
	data := pattern(200*512+7, 3)
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": data}), Timeout: 30 * time.Millisecond})
	for _, window := range []int{1, 4} {
		got := lossyGet(t, st.ap, "f", window, func(n int) bool { return n%7 == 3 })
		if !bytes.Equal(got, data) {
			t.Fatalf("window %d: got %d bytes, want %d, contents differ", window, len(got), len(data))
		}
	}
	for i, tr := range st.transfers(t, 2) {
		if tr.Err != nil || tr.Bytes != int64(len(data)) {
			t.Errorf("transfer %d: %+v", i, tr)
		}
	}
}

// TestSlowACKNotRetransmitted: the timeout counts from each block's
// send, so a client that always answers within it gets every block
// once. The server moves its socket's read deadline lazily (not per
// packet), so after an ACK at 40% of the timeout the deadline still set
// is the previous block's; an ACK of the next block at 80% comes after
// that one fired, and must not have caused a retransmission.
func TestSlowACKNotRetransmitted(t *testing.T) {
	// The ACKs leave at 40 % and 80 % of the timeout after their DATA
	// arrived. A retransmission is a failure unless the test itself sent
	// its ACK too late (a loaded machine stalled it past 90 % of the
	// timeout): then that transfer proves nothing and is tried again.
	const timeout = time.Second
	data := pattern(6*512+3, 5)
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": data}), Timeout: timeout})
	const attempts = 3
	for attempt := 1; ; attempt++ {
		late, err := slowACKTransfer(t, st, data, timeout)
		if err == nil {
			break
		}
		if late == 0 || attempt == attempts {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v, after an ACK sent %v after its DATA arrived (the test was stalled); trying again", attempt, err, late)
	}
	trs := st.transfers(t, 1)
	if tr := trs[len(trs)-1]; tr.Err != nil || tr.Bytes != int64(len(data)) {
		t.Errorf("transfer: %+v", tr)
	}
}

// slowACKTransfer reads data with ACKs sent at 40 % and 80 % of timeout
// after their DATA. A retransmission or a packet out of order is an
// error; late is then how long after its DATA the previous ACK left, if
// that was more than 90 % of timeout (0 otherwise).
func slowACKTransfer(t *testing.T, st *started, data []byte, timeout time.Duration) (late time.Duration, err error) {
	t.Helper()
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet"))
	var got []byte
	var took time.Duration
	for want := uint16(1); ; want++ {
		p, tid := r.recv(3 * timeout)
		if op(p) != opDATA || blockOf(p) != want {
			r.send(tid, []byte{0, 5, 0, 0, 0})
			if took > timeout*9/10 {
				late = took
			}
			return late, fmt.Errorf("got % x, want DATA %d (a retransmission, or out of order)", p[:min(len(p), 4)], want)
		}
		arrived := time.Now()
		got = append(got, p[4:]...)
		if want%2 == 1 {
			time.Sleep(timeout * 4 / 10)
		} else {
			time.Sleep(timeout * 8 / 10)
		}
		r.send(tid, ack(want))
		took = time.Since(arrived)
		if len(p)-4 < 512 {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d, contents differ", len(got), len(data))
	}
	if p, _, ok := r.tryRecv(timeout * 3 / 2); ok {
		t.Fatalf("after the final ACK the server sent % x", p[:min(len(p), 4)])
	}
	return 0, nil
}

// TestDuplicateACK: a duplicate ACK is not answered (no Sorcerer's
// Apprentice): the next block is sent once.
func TestDuplicateACK(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(3*512+1, 1)}), Timeout: time.Minute})
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet"))
	p, tid := r.recv(2 * time.Second)
	if blockOf(p) != 1 {
		t.Fatal("want DATA 1")
	}
	r.send(tid, ack(1))
	r.send(tid, ack(1))
	p, _ = r.recv(2 * time.Second)
	if op(p) != opDATA || blockOf(p) != 2 {
		t.Fatalf("got % x, want DATA 2", p[:4])
	}
	if p, _, ok := r.tryRecv(300 * time.Millisecond); ok {
		t.Fatalf("duplicate ACK answered with % x", p[:4])
	}
	r.send(tid, []byte{0, 5, 0, 0, 0})
}

// TestWindowGap: an ACK inside the window (the client saw a gap) makes
// the server go on from the block after it.
func TestWindowGap(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(20*512, 1)}), Timeout: time.Minute})
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet", "windowsize", "4"))
	_, tid := r.recv(2 * time.Second)
	r.send(tid, ack(0))
	for want := uint16(1); want <= 4; want++ {
		if p, _ := r.recv(2 * time.Second); blockOf(p) != want {
			t.Fatalf("got block %d, want %d", blockOf(p), want)
		}
	}
	r.send(tid, ack(2)) // blocks 3 and 4 "lost"
	for want := uint16(3); want <= 6; want++ {
		if p, _ := r.recv(2 * time.Second); blockOf(p) != want {
			t.Fatalf("after ACK 2: got block %d, want %d", blockOf(p), want)
		}
	}
	r.send(tid, []byte{0, 5, 0, 0, 0})
}

// TestGiveUp: a client that never acknowledges costs the server Retries
// retransmissions, then the transfer is abandoned and reported.
func TestGiveUp(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(600, 1)}), Timeout: 20 * time.Millisecond, Retries: 2})
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet"))
	// The report comes after the last retransmission, whose datagram
	// is then already in the socket's buffer (loopback): count after
	// the report, so that no gap between sends (a loaded machine's
	// scheduling) ends the count early.
	if tr := st.transfers(t, 1)[0]; !errors.Is(tr.Err, errTimeout) {
		t.Fatalf("report error %v, want a timeout", tr.Err)
	}
	n := 0
	for {
		p, _, ok := r.tryRecv(100 * time.Millisecond)
		if !ok {
			break
		}
		if op(p) != opDATA || blockOf(p) != 1 {
			t.Fatalf("got % x, want DATA 1", p[:4])
		}
		n++
	}
	if n != 3 {
		t.Errorf("DATA 1 sent %d times, want 1 + 2 retries", n)
	}
}

// TestWrongTID: a packet from another port is answered with error 5 and
// the transfer goes on undisturbed.
func TestWrongTID(t *testing.T) {
	data := pattern(3*512+5, 2)
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": data}), Timeout: time.Minute})
	r, intruder := newRaw(t), newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet"))
	p, tid := r.recv(2 * time.Second)
	got := append([]byte(nil), p[4:]...)
	intruder.send(tid, ack(1))
	e, from := intruder.recv(2 * time.Second)
	wantError(t, e, ErrCodeUnknownTID)
	if from != tid {
		t.Errorf("error 5 from %v, want the transfer's %v", from, tid)
	}
	if p, _, ok := r.tryRecv(100 * time.Millisecond); ok {
		t.Fatalf("the intruder's ACK moved the transfer: % x", p[:4])
	}
	for b := uint16(1); ; b++ {
		r.send(tid, ack(b))
		p, _ := r.recv(2 * time.Second)
		if blockOf(p) != b+1 {
			t.Fatalf("got block %d, want %d", blockOf(p), b+1)
		}
		got = append(got, p[4:]...)
		if len(p)-4 < 512 {
			r.send(tid, ack(b+1))
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("contents differ")
	}
	if tr := st.transfers(t, 1)[0]; tr.Err != nil {
		t.Fatalf("report error %v", tr.Err)
	}
}

// TestCancelStopsTransfers: when Serve's context ends, every transfer
// stops, Serve returns nil and no goroutine is left.
func TestCancelStopsTransfers(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(5000, 1)}), Timeout: time.Minute})
	for range 5 {
		r := newRaw(t)
		r.send(st.ap, rrq(opRRQ, "f", "octet"))
		r.recv(2 * time.Second)
	}
	// A Get under way stops too, with the context's error.
	silent := newRaw(t) // a "server" that never answers
	ctx, cancel := context.WithCancel(context.Background())
	getDone := make(chan error, 1)
	go func() {
		_, err := Get(ctx, silent.conn.LocalAddr().String(), "f", ClientOptions{Timeout: time.Minute}, &bytes.Buffer{})
		getDone <- err
	}()
	began := time.Now()
	st.stop(t)
	if d := time.Since(began); d > time.Second {
		t.Errorf("Serve took %v to stop", d)
	}
	for _, tr := range st.transfers(t, 5) {
		if !errors.Is(tr.Err, context.Canceled) {
			t.Errorf("report error %v, want context.Canceled", tr.Err)
		}
	}
	cancel()
	if err := <-getDone; !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v, want context.Canceled", err)
	}
	goleak.VerifyNone(t)
}

// TestRetransmittedRRQ: the same request again from the same port while
// its transfer runs is the client's retransmission: one transfer answers.
func TestRetransmittedRRQ(t *testing.T) {
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": pattern(2000, 1)}), Timeout: time.Minute})
	r := newRaw(t)
	req := rrq(opRRQ, "f", "octet", "blksize", "1024")
	r.send(st.ap, req)
	r.send(st.ap, req)
	_, tid := r.recv(2 * time.Second)
	if p, from, ok := r.tryRecv(200 * time.Millisecond); ok {
		t.Fatalf("a second transfer answered from %v (first %v): % x", from, tid, p[:4])
	}
	r.send(tid, []byte{0, 5, 0, 0, 0})
}

// TestProbeThenRequest: a PXE ROM asks for tsize, aborts with error 8 and
// at once asks again from the same port with other options; the second
// request is served even if the first transfer has not yet seen the abort.
func TestProbeThenRequest(t *testing.T) {
	data := pattern(3000, 4)
	st := start(t, &Server{Handler: newMemFS(map[string][]byte{"f": data}), Timeout: time.Minute})
	r := newRaw(t)
	r.send(st.ap, rrq(opRRQ, "f", "octet", "tsize", "0", "blksize", "1456"))
	p, tid := r.recv(2 * time.Second)
	if oackOptions(t, p)["tsize"] != "3000" {
		t.Fatalf("probe OACK %q", p)
	}
	r.send(st.ap, rrq(opRRQ, "f", "octet", "blksize", "1456")) // before the abort
	r.send(tid, []byte{0, 5, 0, 8, 0})
	p, tid2 := r.recv(2 * time.Second)
	if tid2 == tid || oackOptions(t, p)["blksize"] != "1456" {
		t.Fatalf("second request: % x from %v (probe's %v)", p, tid2, tid)
	}
	var got []byte
	r.send(tid2, ack(0))
	for b := uint16(1); ; b++ {
		p, _ := r.recv(2 * time.Second)
		got = append(got, p[4:]...)
		r.send(tid2, ack(b))
		if len(p)-4 < 1456 {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("contents differ")
	}
}
