package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// Ports the server listens on: DHCP, and the PXE port on which PXE
// clients send their ProxyDHCPREQUEST.
const (
	ServerPort = 67
	ClientPort = 68
	PXEPort    = 4011
)

// Defaults and bounds of Options.
const (
	DefaultLeaseTime     = time.Hour
	DefaultOfferHold     = time.Minute
	DefaultDeclineHold   = 10 * time.Minute
	DefaultMaxLeases     = 4096
	DefaultMaxPacketSize = 1500
	DefaultWorkers       = 4

	// MinPacketSize is the size every DHCP host must accept (RFC 2131).
	MinPacketSize = 576
	// MaxPoolSize bounds PoolStart..PoolEnd.
	MaxPoolSize = 1 << 16
	// MaxBootFileLen bounds Decision.BootFile: one option 67.
	MaxBootFileLen = 255
)

// Options configure a Server. The zero value of an optional field takes
// the default named on it.
type Options struct {
	Mode Mode
	// Interface is the network interface Serve binds to (SO_BINDTODEVICE):
	// the server answers only clients on that link.
	Interface string
	// ServerIP is the server's address on Interface: the server
	// identifier (option 54) and, unless a Decision names another one,
	// the TFTP server (siaddr).
	ServerIP netip.Addr

	// Subnet, PoolStart and PoolEnd (inclusive), Router and DNS are
	// required or used in Authoritative mode only. Reservations
	// (Decision.Address) must lie in Subnet; the pool must not contain
	// ServerIP.
	Subnet    netip.Prefix
	PoolStart netip.Addr
	PoolEnd   netip.Addr
	Router    netip.Addr
	DNS       []netip.Addr
	// LeaseTime is the lease granted (default DefaultLeaseTime, at least
	// a minute).
	LeaseTime time.Duration
	// OfferHold is how long an offered address stays kept for the client
	// it was offered to (default DefaultOfferHold).
	OfferHold time.Duration
	// DeclineHold is how long an address a client declined (it found it
	// in use) is not offered again (default DefaultDeclineHold).
	DeclineHold time.Duration

	// Decider says what each client boots (required).
	Decider Decider
	// Observer receives the DHCP stage records; nil records nothing.
	Observer stage.Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock times leases (default clock.System()).
	Clock clock.Clock

	// MaxLeases bounds the lease table (clients remembered, offered or
	// bound); default the larger of DefaultMaxLeases and the pool size.
	MaxLeases int
	// MaxPacketSize bounds the packets read and the answers sent
	// (default DefaultMaxPacketSize, at least MinPacketSize).
	MaxPacketSize int
	// Workers is the number of packets ServeConn handles at once on one
	// socket (default DefaultWorkers, at most 64).
	Workers int
}

// ConfigError is an invalid Options field.
type ConfigError struct {
	Field   string // the Options field, e.g. "PoolStart"
	Problem string // what is wrong and what was expected
}

func (e *ConfigError) Error() string {
	return "dhcp: Options." + e.Field + ": " + e.Problem
}

// Errors Reply wraps, for what callers and metrics branch on.
var (
	// ErrPoolExhausted: no free address for a client (the pool, or the
	// lease table's MaxLeases, is full).
	ErrPoolExhausted = errors.New("dhcp: address pool exhausted")
	// ErrAddressInUse: a client's reserved address is leased to another
	// client.
	ErrAddressInUse = errors.New("dhcp: reserved address leased to another client")
)

// DecisionError is a Decision the server cannot send.
type DecisionError struct {
	MAC     string
	Node    string
	Field   string // the Decision field
	Problem string
}

func (e *DecisionError) Error() string {
	return fmt.Sprintf("dhcp: decision for %s (node %q): %s: %s", e.MAC, e.Node, e.Field, e.Problem)
}

// Server is the DHCP server. It is safe for concurrent use: Reply, Serve
// and ServeConn may run at once on one Server, and share its lease table.
type Server struct {
	opts    Options
	log     *slog.Logger
	leases  *leaseTable
	metrics *metrics
	wire    wireOptions
}

// New validates opts, fills in the defaults and returns a Server.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: newMetrics(), wire: newWireOptions(&opts)}
	if opts.Mode == Authoritative {
		s.leases = newLeaseTable(opts)
	}
	return s, nil
}

func (o *Options) validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if o.Mode != Authoritative && o.Mode != Proxy {
		return bad("Mode", "%q is neither %q nor %q", o.Mode, Authoritative, Proxy)
	}
	if !o.ServerIP.Is4() || o.ServerIP.IsUnspecified() {
		return bad("ServerIP", "%v is not an IPv4 host address", o.ServerIP)
	}
	if len(o.Interface) > 15 {
		return bad("Interface", "%q is longer than an interface name (15)", o.Interface)
	}
	if o.Decider == nil {
		return bad("Decider", "is nil; the server cannot decide what a client boots")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if err := defaultDuration(&o.LeaseTime, DefaultLeaseTime, time.Minute, "LeaseTime"); err != nil {
		return err
	}
	if err := defaultDuration(&o.OfferHold, DefaultOfferHold, time.Second, "OfferHold"); err != nil {
		return err
	}
	if err := defaultDuration(&o.DeclineHold, DefaultDeclineHold, time.Second, "DeclineHold"); err != nil {
		return err
	}
	if o.LeaseTime > 0xffffffff*time.Second {
		return bad("LeaseTime", "%v does not fit option 51 (32-bit seconds)", o.LeaseTime)
	}
	switch {
	case o.MaxPacketSize == 0:
		o.MaxPacketSize = DefaultMaxPacketSize
	case o.MaxPacketSize < MinPacketSize || o.MaxPacketSize > 65507:
		return bad("MaxPacketSize", "%d is outside %d..65507", o.MaxPacketSize, MinPacketSize)
	}
	switch {
	case o.Workers == 0:
		o.Workers = DefaultWorkers
	case o.Workers < 0 || o.Workers > 64:
		return bad("Workers", "%d is outside 1..64", o.Workers)
	}
	if o.Mode == Authoritative {
		if err := o.validatePool(); err != nil {
			return err
		}
	}
	return nil
}

func (o *Options) validatePool() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if !o.Subnet.IsValid() || !o.Subnet.Addr().Is4() || o.Subnet.Bits() > 30 {
		return bad("Subnet", "%v is not an IPv4 prefix of /30 or shorter (required in authoritative mode)", o.Subnet)
	}
	o.Subnet = o.Subnet.Masked()
	network, broadcast := o.Subnet.Addr(), lastAddr(o.Subnet)
	hostIn := func(a netip.Addr) bool { return o.Subnet.Contains(a) && a != network && a != broadcast }
	if !o.PoolStart.Is4() || !hostIn(o.PoolStart) {
		return bad("PoolStart", "%v is not a host address of Subnet %v", o.PoolStart, o.Subnet)
	}
	if !o.PoolEnd.Is4() || !hostIn(o.PoolEnd) {
		return bad("PoolEnd", "%v is not a host address of Subnet %v", o.PoolEnd, o.Subnet)
	}
	start, end := addrNum(o.PoolStart), addrNum(o.PoolEnd)
	if start > end {
		return bad("PoolEnd", "%v is before PoolStart %v", o.PoolEnd, o.PoolStart)
	}
	if end-start+1 > MaxPoolSize {
		return bad("PoolEnd", "pool %v..%v has %d addresses, more than %d", o.PoolStart, o.PoolEnd, end-start+1, MaxPoolSize)
	}
	if n := addrNum(o.ServerIP); o.ServerIP.Is4() && n >= start && n <= end {
		return bad("PoolStart", "pool %v..%v contains ServerIP %v", o.PoolStart, o.PoolEnd, o.ServerIP)
	}
	if o.Router.IsValid() && (!o.Router.Is4() || !hostIn(o.Router)) {
		return bad("Router", "%v is not a host address of Subnet %v", o.Router, o.Subnet)
	}
	for i, d := range o.DNS {
		if !d.Is4() || d.IsUnspecified() {
			return bad(fmt.Sprintf("DNS[%d]", i), "%v is not an IPv4 host address", d)
		}
	}
	pool := int(end - start + 1)
	switch {
	case o.MaxLeases == 0:
		o.MaxLeases = max(DefaultMaxLeases, pool)
	case o.MaxLeases < 1 || o.MaxLeases > 1<<20:
		return bad("MaxLeases", "%d is outside 1..%d", o.MaxLeases, 1<<20)
	}
	return nil
}

func defaultDuration(d *time.Duration, def, least time.Duration, field string) error {
	switch {
	case *d == 0:
		*d = def
	case *d < least:
		return &ConfigError{Field: field, Problem: fmt.Sprintf("%v is shorter than %v", *d, least)}
	}
	return nil
}

// addrNum is an IPv4 address as a number (0 for anything else).
func addrNum(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func numAddr(n uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func lastAddr(p netip.Prefix) netip.Addr {
	return numAddr(addrNum(p.Addr()) | (1<<(32-p.Bits()) - 1))
}

// record sends a stage record to the Observer, if any.
func (s *Server) record(r stage.Record) {
	if s.opts.Observer == nil {
		return
	}
	r.At = s.opts.Clock.Now()
	s.opts.Observer.ObserveBootStage(r)
}

// pxePortKey marks a context of a request that came to PXEPort.
type pxePortKey struct{}

// OnPXEPort returns ctx marked as carrying a request that arrived on the
// PXE port (4011): in Proxy mode, Reply answers a REQUEST there even
// without a server identifier. ServeConn marks requests by itself; tests
// that call Reply directly use this.
func OnPXEPort(ctx context.Context) context.Context {
	return context.WithValue(ctx, pxePortKey{}, true)
}

func onPXEPort(ctx context.Context) bool {
	v, _ := ctx.Value(pxePortKey{}).(bool)
	return v
}
