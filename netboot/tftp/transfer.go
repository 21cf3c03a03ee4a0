package tftp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// errTimeout is wrapped by Transfer.Err when the client stopped
// answering.
var errTimeout = errors.New("tftp: client stopped acknowledging")

// readAhead is how much of a file a transfer reads at once.
const readAhead = 64 << 10

// serveRequest runs one read request on its own socket, start to end.
func serveRequest(ctx context.Context, cfg *config, local, remote netip.AddrPort, req *request) {
	start := time.Now()
	tr := Transfer{
		Request: Request{
			Filename: req.filename, Remote: remote, Local: local, Options: req.options,
		},
		BlockSize: defaultBlockSize,
	}
	defer func() {
		tr.Duration = time.Since(start)
		if tr.Err != nil {
			cfg.log.Info("tftp: transfer failed", "remote", remote, "filename", tr.Request.Filename,
				"bytes", tr.Bytes, "err", tr.Err)
		} else {
			cfg.log.Info("tftp: transfer done", "remote", remote, "filename", tr.Request.Filename,
				"bytes", tr.Bytes, "blksize", tr.BlockSize, "duration", tr.Duration)
		}
		if cfg.onTransfer != nil {
			cfg.onTransfer(tr)
		}
	}()
	sock, err := cfg.listen(local.Addr())
	if err != nil {
		tr.Err = fmt.Errorf("tftp: transfer socket on %s: %w", local.Addr(), err)
		return
	}
	defer sock.Close()
	stop := context.AfterFunc(ctx, func() { sock.Close() })
	defer stop()
	refuse := func(code ErrorCode, msg string, err error) {
		tr.Err = err
		_, _ = sock.WriteToUDPAddrPort(encodeError(code, msg), remote)
	}

	if req.mode != "octet" && req.mode != "netascii" {
		refuse(ErrCodeIllegal, "unsupported mode "+strconv.Quote(req.mode),
			fmt.Errorf("tftp: mode %q of %s is not octet or netascii", req.mode, req.filename))
		return
	}
	name, err := cleanFilename(req.filename)
	if err != nil {
		refuse(ErrCodeAccess, "access violation", err)
		return
	}
	tr.Request.Filename = name
	f, err := cfg.handler.OpenTFTP(ctx, &tr.Request)
	switch {
	case errors.Is(err, ErrNotFound):
		refuse(ErrCodeNotFound, "file not found", err)
		return
	case errors.Is(err, ErrAccess):
		refuse(ErrCodeAccess, "access violation", err)
		return
	case err != nil:
		refuse(ErrCodeUndefined, "server error", fmt.Errorf("tftp: open %q: %w", name, err))
		return
	case f == nil:
		refuse(ErrCodeUndefined, "server error", fmt.Errorf("tftp: open %q: Handler returned no File and no error", name))
		return
	}
	defer f.Close()
	if f.Size() < 0 {
		refuse(ErrCodeUndefined, "server error", fmt.Errorf("tftp: open %q: File.Size %d is negative", name, f.Size()))
		return
	}
	netascii := req.mode == "netascii"
	neg := negotiate(req, cfg, f.Size(), netascii, tr.Request.Remote.Addr().Unmap().Is6())
	tr.BlockSize = neg.blksize
	// Read ahead in 64 KiB: one pread per 44 blocks of 1468 bytes
	// instead of one per block.
	var src io.Reader = bufio.NewReaderSize(io.NewSectionReader(f, 0, f.Size()), max(readAhead, neg.blksize))
	if netascii {
		src = newNetasciiReader(src)
	}
	s := &sender{
		conn: sock, remote: remote, src: src, blksize: neg.blksize, window: neg.window,
		timeout: neg.timeout, retries: cfg.retries,
	}
	tr.Bytes, tr.Err = s.run(neg.oack)
	if tr.Err != nil && ctx.Err() != nil {
		tr.Err = fmt.Errorf("tftp: transfer stopped: %w", ctx.Err())
	}
}

// negotiation is the outcome of a request's options (RFC 2347).
type negotiation struct {
	blksize int
	window  int
	timeout time.Duration
	oack    []byte // nil when no option was acknowledged
}

// negotiate decides the options of a read request. An option with a
// value out of its range is ignored, as are unknown options (RFC 2347:
// the server omits from the OACK what it does not accept). tsize is not
// acknowledged in netascii mode: its size on the wire differs from the
// file's, and counting it would mean reading the file twice. MaxBlockSize
// is IPv4 arithmetic (the MTU less 20 bytes of IPv4, 8 of UDP, 4 of
// TFTP): an IPv6 client's cap is 20 bytes less, its header being 40
// bytes, so that the default block fits an MTU of 1500 unfragmented on
// both families (1468 and 1448).
func negotiate(req *request, cfg *config, size int64, netascii, v6 bool) negotiation {
	maxBlock := cfg.maxBlock
	if v6 {
		maxBlock = max(maxBlock-ipv6Overhead, minBlockSize)
	}
	n := negotiation{blksize: defaultBlockSize, window: 1, timeout: cfg.timeout}
	var names []string
	vals := make(map[string]string)
	for _, name := range req.order {
		v := req.options[name]
		switch name {
		case "blksize":
			b, ok := parseUint(v, minBlockSize, 1<<31)
			if !ok {
				continue
			}
			n.blksize = int(min(b, int64(maxBlock)))
			vals[name] = strconv.Itoa(n.blksize)
		case "tsize":
			if _, ok := parseUint(v, 0, 1<<62); !ok || netascii {
				continue
			}
			vals[name] = strconv.FormatInt(size, 10)
		case "timeout":
			t, ok := parseUint(v, 1, 255)
			if !ok {
				continue
			}
			n.timeout = time.Duration(t) * time.Second
			vals[name] = strconv.FormatInt(t, 10)
		case "windowsize":
			w, ok := parseUint(v, 1, maxWindowSize)
			if !ok || cfg.maxWindow <= 1 {
				continue
			}
			n.window = int(min(w, int64(cfg.maxWindow)))
			vals[name] = strconv.Itoa(n.window)
		default:
			continue
		}
		names = append(names, name)
	}
	if len(names) > 0 {
		n.oack = encodeOACK(names, vals)
	}
	return n
}

// sender sends a file as DATA blocks, window blocks at a time (RFC 7440;
// a window of 1 is RFC 1350's lock step), and retransmits on timeout.
type sender struct {
	conn    *net.UDPConn
	remote  netip.AddrPort
	src     io.Reader
	blksize int
	window  int
	timeout time.Duration
	retries int

	// Block numbers are counted in 64 bits and sent modulo 65536, so a
	// file of more than 65535 blocks rolls over to block 0 as tftp-hpa,
	// dnsmasq and the PXE clients that accept rollover expect.
	acked uint64   // the last block the client acknowledged
	sent  uint64   // the last block read and sent
	last  uint64   // the final (short) block, once read; 0 before
	slots [][]byte // DATA packets of blocks acked+1..sent, at block % window
	bytes int64
	in    []byte
	armed time.Time // the socket's read deadline; zero before the first
}

// run sends the OACK (if any) then the file, and returns the bytes the
// client acknowledged.
func (s *sender) run(oack []byte) (int64, error) {
	s.in = make([]byte, 1024)
	s.slots = make([][]byte, s.window)
	if oack != nil {
		if err := s.negotiate(oack); err != nil {
			return 0, err
		}
	}
	for {
		if err := s.fill(); err != nil {
			return s.bytes, err
		}
		done, err := s.await()
		if err != nil || done {
			return s.bytes, err
		}
	}
}

// negotiate sends the OACK until the client acknowledges it with ACK 0.
func (s *sender) negotiate(oack []byte) error {
	for try := 0; ; try++ {
		if try > s.retries {
			return fmt.Errorf("%w: no ACK of the OACK after %d tries", errTimeout, try)
		}
		if _, err := s.conn.WriteToUDPAddrPort(oack, s.remote); err != nil {
			return fmt.Errorf("tftp: send OACK: %w", err)
		}
		deadline := time.Now().Add(s.timeout)
		for {
			block, ok, err := s.receive(deadline)
			if err != nil {
				return err
			}
			if !ok {
				break // timed out
			}
			if block == 0 {
				return nil
			}
		}
	}
}

// fill reads and sends blocks until the window is full or the final
// block is out.
func (s *sender) fill() error {
	for s.sent-s.acked < uint64(s.window) && (s.last == 0 || s.sent < s.last) {
		b := s.sent + 1
		i := b % uint64(s.window)
		if s.slots[i] == nil {
			s.slots[i] = make([]byte, 4+s.blksize)
		}
		p := s.slots[i][:4+s.blksize]
		binary.BigEndian.PutUint16(p, opDATA)
		binary.BigEndian.PutUint16(p[2:], uint16(b))
		n, err := io.ReadFull(s.src, p[4:])
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			s.last = b
		case err != nil:
			_, _ = s.conn.WriteToUDPAddrPort(encodeError(ErrCodeUndefined, "server read error"), s.remote)
			return fmt.Errorf("tftp: read block %d: %w", b, err)
		}
		s.slots[i] = p[:4+n]
		s.sent = b
		if err := s.send(b); err != nil {
			return err
		}
	}
	return nil
}

func (s *sender) send(b uint64) error {
	if _, err := s.conn.WriteToUDPAddrPort(s.slots[b%uint64(s.window)], s.remote); err != nil {
		return fmt.Errorf("tftp: send block %d: %w", b, err)
	}
	return nil
}

// await waits for an ACK that moves the window, retransmitting the
// outstanding blocks on each timeout. A duplicate ACK (of a block
// already acknowledged) is ignored rather than answered, which keeps
// both sides from doubling every packet after one delay (the Sorcerer's
// Apprentice syndrome, RFC 1123 4.2.3.1). An ACK inside the window
// starts the next window after it (RFC 7440): the blocks after it are
// sent again. It reports done once the final block is acknowledged.
func (s *sender) await() (bool, error) {
	for try := 0; ; try++ {
		if try > s.retries {
			return false, fmt.Errorf("%w: block %d unacknowledged after %d tries", errTimeout, s.acked+1, try)
		}
		if try > 0 {
			for b := s.acked + 1; b <= s.sent; b++ {
				if err := s.send(b); err != nil {
					return false, err
				}
			}
		}
		deadline := time.Now().Add(s.timeout)
		for {
			block, ok, err := s.receive(deadline)
			if err != nil {
				return false, err
			}
			if !ok {
				break // timed out: retransmit
			}
			d := uint64(block - uint16(s.acked))
			if d == 0 || d > s.sent-s.acked {
				continue // duplicate or stale
			}
			for b := s.acked + 1; b <= s.acked+d; b++ {
				s.bytes += int64(len(s.slots[b%uint64(s.window)]) - 4)
			}
			s.acked += d
			if s.last != 0 && s.acked == s.last {
				return true, nil
			}
			for b := s.acked + 1; b <= s.sent; b++ {
				if err := s.send(b); err != nil {
					return false, err
				}
			}
			return false, nil
		}
	}
}

// receive returns the block number of the next ACK from the client,
// ok false at the deadline, or an error when the client sent ERROR or
// the socket failed. A packet from another address is answered with
// error 5 and otherwise ignored; a malformed one from the client, or
// one that is neither ACK nor ERROR, is ignored.
//
// The socket's read deadline is moved only when it lags deadline by
// more than half a timeout, not once per packet: one that fires early
// is moved to deadline and the wait goes on, so the client still has
// until deadline to answer.
func (s *sender) receive(deadline time.Time) (uint16, bool, error) {
	if err := s.arm(deadline, false); err != nil {
		return 0, false, err
	}
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(s.in)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return 0, false, fmt.Errorf("tftp: receive: %w", err)
			}
			if !time.Now().Before(deadline) {
				return 0, false, nil
			}
			if err := s.arm(deadline, true); err != nil {
				return 0, false, err
			}
			continue
		}
		if unmap(from) != s.remote {
			if n >= 2 && s.in[0] == 0 && s.in[1] == byte(opERROR) {
				continue // never answer an error with an error
			}
			_, _ = s.conn.WriteToUDPAddrPort(encodeError(ErrCodeUnknownTID, "unknown transfer ID"), from)
			continue
		}
		p := s.in[:n]
		if n >= 4 && binary.BigEndian.Uint16(p) == opACK {
			// The common case, parsed here without allocating;
			// parsePacket also tolerates trailing bytes after an ACK.
			return binary.BigEndian.Uint16(p[2:]), true, nil
		}
		pk, err := parsePacket(p, 0)
		if err != nil {
			continue
		}
		if pk.op == opERROR {
			return 0, false, &RemoteError{Code: pk.code, Message: pk.message}
		}
	}
}

// arm sets the socket's read deadline to deadline when force is set, when
// none is set, when the one set is later than deadline, or when it is
// more than half a timeout earlier.
func (s *sender) arm(deadline time.Time, force bool) error {
	if !force && !s.armed.IsZero() && !s.armed.After(deadline) && deadline.Sub(s.armed) <= s.timeout/2 {
		return nil
	}
	if err := s.conn.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("tftp: %w", err)
	}
	s.armed = deadline
	return nil
}
