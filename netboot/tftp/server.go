package tftp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Defaults of the Server's configuration fields.
const (
	DefaultMaxTransfers = 64
	DefaultTimeout      = time.Second
	DefaultRetries      = 5
	// DefaultMaxBlockSize is the largest block that fits an Ethernet
	// frame of MTU 1500 without IP fragmentation (1500 - 20 IPv4 - 8 UDP
	// - 4 TFTP). Many PXE ROMs reassemble fragments badly or not at all,
	// so a bigger block trades a little loopback speed for boots that
	// fail; raise it only on networks known to carry jumbo frames.
	DefaultMaxBlockSize = 1468
	// ipv6Overhead is how much larger IPv6's header is than IPv4's: the
	// block cap of an IPv6 transfer is MaxBlockSize less this.
	ipv6Overhead = 20
	// DefaultMaxWindowSize is the RFC 7440 window granted when a client
	// asks for a larger one: 16 blocks of 1468 bytes are 23 KB in flight,
	// small for the socket buffers and enough to hide the round trip.
	DefaultMaxWindowSize = 16
	// DefaultMaxQueued is how many read requests wait for a transfer
	// slot: a rack of 1,000 machines powered on together fits.
	DefaultMaxQueued = 1024
	// DefaultQueueTimeout is how long a waiting request is kept after
	// the client last sent it. PXE ROMs send their read request again
	// every few seconds (EDK2 every 4 s, 6 times; iPXE backing off to
	// 10 s), so a client still waiting refreshes its place, and one that
	// gave up is dropped before its turn comes.
	DefaultQueueTimeout = 15 * time.Second
)

// Server is a read-only TFTP server. Set its fields before Serve; they
// must not change while it runs. The zero value of every field but
// Handler takes the default named beside it. One Server may Serve
// several listeners at once (one per provisioning interface); each call
// has its own MaxTransfers.
type Server struct {
	// Handler opens the files requested. Required.
	Handler Handler
	// MaxTransfers bounds the transfers running at once
	// (DefaultMaxTransfers). A read request beyond it waits in a queue,
	// first come first served, and its transfer starts when one ends.
	// It is not answered while it waits: firmware treats a TFTP ERROR
	// as the end of its boot attempt (EDK2 and iPXE move on to the next
	// boot option), while a request left unanswered is sent again, and
	// a retransmission of a waiting request keeps its place. So does a
	// new request from the same address (a client that gave up and
	// started again from a new port): one place per client address.
	MaxTransfers int
	// MaxQueued bounds the requests waiting for a transfer slot
	// (DefaultMaxQueued). A request beyond it is dropped unanswered, so
	// that the client sends it again later.
	MaxQueued int
	// QueueTimeout is how long a waiting request is kept after the
	// client last sent it (DefaultQueueTimeout); an older one is dropped
	// when its turn comes, as its client has given up.
	QueueTimeout time.Duration
	// Timeout is the retransmission timeout of a transfer
	// (DefaultTimeout) when the client does not negotiate one with
	// RFC 2349's timeout option (1 to 255 s).
	Timeout time.Duration
	// Retries is how many times in a row a block (or OACK) is sent
	// again after a timeout before the transfer is abandoned
	// (DefaultRetries).
	Retries int
	// MaxBlockSize caps the RFC 2348 blksize an IPv4 client may
	// negotiate (DefaultMaxBlockSize); values are clamped to 8..65464.
	// An IPv6 client's cap is 20 bytes less (its header is 40 bytes,
	// not 20): 1448 by default.
	MaxBlockSize int
	// MaxWindowSize caps the RFC 7440 windowsize a client may negotiate
	// (DefaultMaxWindowSize); 1 disables windowing (the option is then
	// not acknowledged).
	MaxWindowSize int
	// OnTransfer, if set, is called once per read request the server
	// started a transfer for, when it finished or failed, on that
	// transfer's goroutine: it holds one of MaxTransfers while it runs,
	// so it must return quickly. A request refused before the Handler
	// ran (a traversal, an unsupported mode) is reported with the
	// filename as the client sent it. Requests refused by the listener
	// itself (malformed, write requests, a full queue) are only logged.
	OnTransfer func(Transfer)
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
	// ListenTransfer, if set, opens the socket of each transfer: a UDP
	// socket on local (the address the request came to) and a free
	// port. Nil means net.ListenUDP. A server whose listener was opened
	// in another network namespace than its goroutines run in (a thread
	// that entered a namespace with setns, as tests do) needs it: the
	// transfer sockets must be opened in that namespace too.
	ListenTransfer func(local netip.Addr) (*net.UDPConn, error)
}

// config is a Server's configuration with the defaults applied.
type config struct {
	handler      Handler
	maxTransfers int
	timeout      time.Duration
	retries      int
	maxBlock     int
	maxWindow    int
	maxQueued    int
	queueTimeout time.Duration
	onTransfer   func(Transfer)
	log          *slog.Logger
	listen       func(local netip.Addr) (*net.UDPConn, error)
}

func (s *Server) config() (config, error) {
	c := config{
		handler: s.Handler, maxTransfers: s.MaxTransfers, timeout: s.Timeout,
		retries: s.Retries, maxBlock: s.MaxBlockSize, maxWindow: s.MaxWindowSize,
		onTransfer: s.OnTransfer, log: s.Logger, listen: s.ListenTransfer,
		maxQueued: s.MaxQueued, queueTimeout: s.QueueTimeout,
	}
	if c.listen == nil {
		c.listen = listenTransfer
	}
	if c.handler == nil {
		return c, errors.New("tftp: Server.Handler is nil")
	}
	if c.maxTransfers <= 0 {
		c.maxTransfers = DefaultMaxTransfers
	}
	if c.maxQueued <= 0 {
		c.maxQueued = DefaultMaxQueued
	}
	if c.queueTimeout <= 0 {
		c.queueTimeout = DefaultQueueTimeout
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.retries <= 0 {
		c.retries = DefaultRetries
	}
	if c.maxBlock <= 0 {
		c.maxBlock = DefaultMaxBlockSize
	}
	c.maxBlock = min(max(c.maxBlock, minBlockSize), maxBlockSize)
	if c.maxWindow <= 0 {
		c.maxWindow = DefaultMaxWindowSize
	}
	c.maxWindow = min(c.maxWindow, maxWindowSize)
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// ListenAndServe listens on the UDP address addr ("192.0.2.1:69") and
// serves on it (see Serve) until ctx ends; it closes the listener
// before returning.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	conn, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("tftp: listen on %s: %w", addr, err)
	}
	defer conn.Close()
	return s.Serve(ctx, conn)
}

// Serve answers the read requests arriving on conn, the server's
// well-known port, until ctx ends. Each transfer runs on its own
// goroutine with its own UDP socket bound to conn's local IP address and
// an ephemeral port (its transfer ID, RFC 1350 section 4). Bind conn to
// the address clients ask (not the unspecified address) so that replies
// come from the address the client sent to, which PXE ROMs check.
//
// Serve returns nil once ctx ended and every transfer it started has
// stopped (no goroutine of it is left), or the error that made conn
// unusable, after stopping the transfers likewise. It does not close
// conn, but leaves a read deadline in the past on it.
func (s *Server) Serve(ctx context.Context, conn net.PacketConn) error {
	cfg, err := s.config()
	if err != nil {
		return err
	}
	laddr, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return fmt.Errorf("tftp: Serve needs a UDP listener, not %T", conn.LocalAddr())
	}
	local := laddr.AddrPort()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	// known holds the running and the waiting requests by client and
	// request bytes. A request identical to a running one is the
	// client's retransmission (our first packet was slow) and is
	// dropped; identical to a waiting one, it refreshes the wait. A
	// different one from the same port starts a transfer of its own,
	// since PXE ROMs ask for tsize, abort with an ERROR and ask again
	// from the same port at once, before the aborted transfer may have
	// noticed.
	type key struct {
		remote netip.AddrPort
		req    string
	}
	type entry struct {
		k        key
		req      *request
		lastSeen time.Time
	}
	var (
		mu    sync.Mutex
		known = make(map[key]*entry)
		queue []*entry // waiting, oldest first
		// waiting is the queued entry of each client address: a
		// client that gave up waiting and asks again from a new port
		// (firmware restarting its attempt) takes its old place.
		waiting = make(map[netip.Addr]*entry)
		running int
	)
	// launch starts e's transfer; mu is held. When the transfer ends,
	// the oldest waiting request whose client is still there starts in
	// its slot.
	var launch func(e *entry)
	launch = func(e *entry) {
		running++
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveRequest(ctx, &cfg, local, e.k.remote, e.req)
			mu.Lock()
			defer mu.Unlock()
			delete(known, e.k)
			running--
			for len(queue) > 0 && ctx.Err() == nil {
				next := queue[0]
				queue[0] = nil
				queue = queue[1:]
				delete(waiting, next.k.remote.Addr())
				if time.Since(next.lastSeen) > cfg.queueTimeout {
					delete(known, next.k)
					cfg.log.Info("tftp: waiting request dropped, client gone", "remote", next.k.remote,
						"filename", next.req.filename)
					continue
				}
				launch(next)
				break
			}
		}()
	}
	buf := make([]byte, maxRequestSize+1)
	for {
		n, addr, err := conn.ReadFrom(buf)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // a deadline someone else set; ours is handled above
			}
			return fmt.Errorf("tftp: read on %s: %w", local, err)
		}
		uaddr, ok := addr.(*net.UDPAddr)
		if !ok || n == 0 {
			continue
		}
		remote := unmap(uaddr.AddrPort())
		req, err := parseRequest(buf[:n])
		if err != nil {
			if n < 2 || buf[0] != 0 || buf[1] == 0 || buf[1] > byte(opOACK) || buf[1] == byte(opERROR) {
				// Not TFTP at all, or an error (never answered with
				// one): dropped, so that noise is not amplified.
				continue
			}
			cfg.log.Debug("tftp: malformed request", "remote", remote, "err", err)
			_, _ = conn.WriteTo(encodeError(ErrCodeIllegal, "malformed request"), addr)
			continue
		}
		if req.op == opWRQ {
			cfg.log.Info("tftp: write request refused", "remote", remote, "filename", req.filename)
			_, _ = conn.WriteTo(encodeError(ErrCodeAccess, "server is read-only"), addr)
			continue
		}
		k := key{remote, string(buf[:n])}
		mu.Lock()
		if e := known[k]; e != nil {
			// The client sent its request again: the running transfer
			// answers it, or it keeps its place in the queue.
			e.lastSeen = time.Now()
			mu.Unlock()
			continue
		}
		if e := waiting[remote.Addr()]; e != nil {
			// The client asks again from another port or for another
			// file: its previous request is dead, this one waits in
			// its place.
			delete(known, e.k)
			e.k, e.req, e.lastSeen = k, req, time.Now()
			known[k] = e
			mu.Unlock()
			continue
		}
		if running >= cfg.maxTransfers && len(queue) >= cfg.maxQueued {
			// Full: drop the requests whose clients went quiet.
			queue = slices.DeleteFunc(queue, func(q *entry) bool {
				if time.Since(q.lastSeen) <= cfg.queueTimeout {
					return false
				}
				delete(known, q.k)
				delete(waiting, q.k.remote.Addr())
				return true
			})
		}
		e := &entry{k: k, req: req, lastSeen: time.Now()}
		switch {
		case running < cfg.maxTransfers:
			known[k] = e
			launch(e)
		case len(queue) < cfg.maxQueued:
			known[k] = e
			waiting[remote.Addr()] = e
			queue = append(queue, e)
			cfg.log.Debug("tftp: request waits for a transfer slot", "remote", remote,
				"filename", req.filename, "waiting", len(queue), "max_transfers", cfg.maxTransfers)
		default:
			cfg.log.Warn("tftp: transfer queue full, request dropped for the client to retry", "remote", remote,
				"filename", req.filename, "max_transfers", cfg.maxTransfers, "max_queued", cfg.maxQueued)
		}
		mu.Unlock()
	}
}

// unmap turns an IPv4-mapped IPv6 address into plain IPv4, so that one
// client has one key whatever socket family saw it.
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// listenTransfer is the default transfer socket: local's address, a free
// port.
func listenTransfer(local netip.Addr) (*net.UDPConn, error) {
	return net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
}
