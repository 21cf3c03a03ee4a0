package tftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// ClientOptions are what Get asks the server for. The zero value is a
// plain RFC 1350 octet transfer of 512-byte blocks with no options.
type ClientOptions struct {
	// BlockSize, if not 0, is the blksize asked for (8..65464).
	BlockSize int
	// WindowSize, if above 1, is the windowsize asked for (RFC 7440).
	WindowSize int
	// Timeout is how long to wait for a packet before sending the last
	// one again (default 1 s). TimeoutOption, if not 0, is the RFC 2349
	// timeout in seconds asked of the server.
	Timeout       time.Duration
	TimeoutOption int
	// Retries is how many timeouts in a row end the transfer (default 5).
	Retries int
	// TSize asks the server for the file size (tsize 0).
	TSize bool
	// Netascii asks for netascii mode and decodes it (CR LF to LF,
	// CR NUL to CR) into w.
	Netascii bool
	// LocalAddr, if valid, is the address the client's socket binds to
	// (a free port on it): one of several addresses a host holds, as a
	// boot storm benchmark's simulated machines do. Invalid means any.
	LocalAddr netip.Addr
}

// Result is what a transfer of Get negotiated and delivered.
type Result struct {
	// Bytes is the number of bytes written to w.
	Bytes int64
	// BlockSize and WindowSize are the values in use (512 and 1 when the
	// server ignored the options).
	BlockSize  int
	WindowSize int
	// TSize is the size the server announced, or -1.
	TSize int64
	// OACK is the server's option acknowledgement as received, nil when
	// the server sent DATA at once.
	OACK map[string]string
}

// Get reads filename from the TFTP server at server ("127.0.0.1:69")
// into w. It returns a *RemoteError when the server refuses the request
// or aborts the transfer, and an error wrapping context.Canceled (or
// DeadlineExceeded) when ctx ends first. The final ACK is sent once,
// without dallying: a server that loses it retransmits to a closed port.
func Get(ctx context.Context, server, filename string, o ClientOptions, w io.Writer) (Result, error) {
	res := Result{BlockSize: defaultBlockSize, WindowSize: 1, TSize: -1}
	raddr, err := netip.ParseAddrPort(server)
	if err != nil {
		ua, rerr := net.ResolveUDPAddr("udp", server)
		if rerr != nil {
			return res, fmt.Errorf("tftp: server address %q: %w", server, rerr)
		}
		raddr = ua.AddrPort()
	}
	raddr = unmap(raddr)
	laddr := &net.UDPAddr{}
	if raddr.Addr().Is4() {
		laddr.IP = net.IPv4zero
	}
	if o.LocalAddr.IsValid() {
		laddr.IP = o.LocalAddr.AsSlice()
	}
	conn, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return res, fmt.Errorf("tftp: client socket: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	c := &getter{conn: conn, server: raddr, opts: o, timeout: o.Timeout, retries: o.Retries, w: w}
	if c.timeout <= 0 {
		c.timeout = time.Second
	}
	if c.retries <= 0 {
		c.retries = DefaultRetries
	}
	var nw *netasciiWriter
	if o.Netascii {
		nw = &netasciiWriter{w: w}
		c.w = nw
	}
	err = c.run(filename, &res)
	if err == nil && nw != nil {
		err = nw.flush()
		res.Bytes = nw.written
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("tftp: get %q: %w", filename, ctx.Err())
	}
	return res, err
}

// getter is the receiving side of one transfer.
type getter struct {
	conn    *net.UDPConn
	server  netip.AddrPort // the server's well-known port, then its TID
	tid     bool           // server holds the transfer's TID
	opts    ClientOptions
	timeout time.Duration
	retries int
	w       io.Writer
	last    []byte // the packet to send again on timeout
}

func (c *getter) run(filename string, res *Result) error {
	mode := "octet"
	if c.opts.Netascii {
		mode = "netascii"
	}
	var names []string
	vals := map[string]string{}
	if c.opts.BlockSize != 0 {
		names = append(names, "blksize")
		vals["blksize"] = strconv.Itoa(c.opts.BlockSize)
	}
	if c.opts.TSize {
		names = append(names, "tsize")
		vals["tsize"] = "0"
	}
	if c.opts.TimeoutOption != 0 {
		names = append(names, "timeout")
		vals["timeout"] = strconv.Itoa(c.opts.TimeoutOption)
	}
	if c.opts.WindowSize > 1 {
		names = append(names, "windowsize")
		vals["windowsize"] = strconv.Itoa(c.opts.WindowSize)
	}
	c.last = encodeRequest(opRRQ, filename, mode, names, vals)
	if err := c.write(c.last); err != nil {
		return err
	}
	buf := make([]byte, 4+max(c.opts.BlockSize, defaultBlockSize)+1)
	var expect uint16 = 1 // the next block wanted
	inWindow := 0         // blocks received since the last ACK
	resynced := false     // an ACK for a gap was sent since the last block
	for tries := 0; ; {
		pk, err := c.receive(buf, res.BlockSize)
		if err != nil {
			return err
		}
		if pk == nil {
			tries++
			if tries > c.retries {
				return fmt.Errorf("%w: no answer from %s after %d tries", errTimeout, c.server, tries)
			}
			if err := c.write(c.last); err != nil {
				return err
			}
			continue
		}
		switch pk.op {
		case opOACK:
			if res.OACK != nil || expect != 1 {
				continue // a retransmitted OACK: our ACK 0 is resent on timeout
			}
			if err := c.accept(pk.options, res); err != nil {
				_ = c.write(encodeError(ErrCodeOptionRefused, err.Error()))
				return err
			}
			tries = 0
			c.last = encodeACK(0)
			if err := c.write(c.last); err != nil {
				return err
			}
		case opDATA:
			if pk.block != expect {
				// A gap, or a block again after our ACK was lost: say
				// where we are, and the server goes on from there.
				// In lock step every duplicate is answered (the sender
				// does not answer duplicate ACKs, so this cannot
				// cascade); in a window, once per window.
				if res.WindowSize == 1 || !resynced {
					c.last = encodeACK(expect - 1)
					inWindow, resynced = 0, true
					if err := c.write(c.last); err != nil {
						return err
					}
				}
				continue
			}
			tries, resynced = 0, false
			if _, err := c.w.Write(pk.data); err != nil {
				_ = c.write(encodeError(ErrCodeDiskFull, "write failed"))
				return fmt.Errorf("tftp: write block %d: %w", pk.block, err)
			}
			res.Bytes += int64(len(pk.data))
			final := len(pk.data) < res.BlockSize
			expect++
			inWindow++
			if final || inWindow >= res.WindowSize {
				c.last = encodeACK(pk.block)
				inWindow = 0
				if err := c.write(c.last); err != nil {
					return err
				}
			}
			if final {
				return nil
			}
		}
	}
}

// accept checks an OACK against what was asked: a server may lower
// blksize and windowsize, must echo timeout, and must not add options.
func (c *getter) accept(opts map[string]string, res *Result) error {
	res.OACK = opts
	for name, v := range opts {
		switch name {
		case "blksize":
			b, ok := parseUint(v, minBlockSize, int64(max(c.opts.BlockSize, minBlockSize)))
			if !ok || c.opts.BlockSize == 0 {
				return fmt.Errorf("tftp: OACK blksize %q, asked %d", v, c.opts.BlockSize)
			}
			res.BlockSize = int(b)
		case "windowsize":
			w, ok := parseUint(v, 1, int64(max(c.opts.WindowSize, 1)))
			if !ok || c.opts.WindowSize <= 1 {
				return fmt.Errorf("tftp: OACK windowsize %q, asked %d", v, c.opts.WindowSize)
			}
			res.WindowSize = int(w)
		case "tsize":
			t, ok := parseUint(v, 0, 1<<62)
			if !ok || !c.opts.TSize {
				return fmt.Errorf("tftp: OACK tsize %q not asked for or not a size", v)
			}
			res.TSize = t
		case "timeout":
			if v != strconv.Itoa(c.opts.TimeoutOption) {
				return fmt.Errorf("tftp: OACK timeout %q, asked %d", v, c.opts.TimeoutOption)
			}
		default:
			return fmt.Errorf("tftp: OACK has option %q not asked for", name)
		}
	}
	return nil
}

func (c *getter) write(p []byte) error {
	if _, err := c.conn.WriteToUDPAddrPort(p, c.server); err != nil {
		return fmt.Errorf("tftp: send to %s: %w", c.server, err)
	}
	return nil
}

// receive returns the next packet of the transfer, nil on timeout, or an
// error for an ERROR packet or a broken socket. The first answer fixes
// the server's TID; packets from any other address get error 5.
func (c *getter) receive(buf []byte, blksize int) (*packet, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, fmt.Errorf("tftp: %w", err)
	}
	for {
		n, from, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, nil
			}
			return nil, fmt.Errorf("tftp: receive: %w", err)
		}
		from = unmap(from)
		if !c.tid && from.Addr() == c.server.Addr() {
			c.server, c.tid = from, true
		}
		if from != c.server {
			if n >= 2 && buf[0] == 0 && buf[1] == byte(opERROR) {
				continue
			}
			_ = c.writeTo(encodeError(ErrCodeUnknownTID, "unknown transfer ID"), from)
			continue
		}
		pk, err := parsePacket(buf[:n], blksize)
		if err != nil {
			continue
		}
		if pk.op == opERROR {
			return nil, &RemoteError{Code: pk.code, Message: pk.message}
		}
		return pk, nil
	}
}

func (c *getter) writeTo(p []byte, to netip.AddrPort) error {
	_, err := c.conn.WriteToUDPAddrPort(p, to)
	return err
}
