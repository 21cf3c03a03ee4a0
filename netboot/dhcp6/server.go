package dhcp6

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// Ports: the server's and the client's (RFC 8415), and the PXE port on
// which a UEFI PXE firmware sends its Request to a proxy it chose.
const (
	ServerPort = 547
	ClientPort = 546
	PXEPort    = 4011
)

// Defaults and bounds of Options.
const (
	DefaultPreferredLifetime = time.Hour
	DefaultValidLifetime     = 2 * time.Hour
	DefaultOfferHold         = time.Minute
	DefaultDeclineHold       = 10 * time.Minute
	DefaultMaxLeases         = 4096
	DefaultMaxLearned        = 4096
	DefaultMaxPacketSize     = 1500
	DefaultWorkers           = 4

	// MinPacketSize is IPv6's minimum MTU: every answer fits in it
	// (RFC 8415 leaves fragmentation to IPv6; firmware does not
	// reassemble).
	MinPacketSize = 1280
	// MaxPoolSize bounds PoolStart..PoolEnd.
	MaxPoolSize = 1 << 16
	// MaxBootFileURLLen bounds Decision.BootFileURL.
	MaxBootFileURLLen = 1024
)

// Options configure a Server. The zero value of an optional field takes
// the default named on it.
type Options struct {
	Mode Mode
	// Interface is the network interface Serve binds to
	// (SO_BINDTODEVICE), where it joins ff02::1:2: the server answers
	// only clients on that link, and relays that send to it.
	Interface string
	// ServerDUID is the server's DUID (option 2). Nil derives a DUID-UUID
	// from ServerAddr, so that it stays the same across restarts
	// (clients renew with the server that leased to them).
	ServerDUID dhcpv6.DUID
	// ServerAddr is the server's (global or unique local) address on
	// Interface. Required when ServerDUID is nil; in Stateful mode it
	// must lie in Prefix and outside the pool.
	ServerAddr netip.Addr

	// Prefix, PoolStart and PoolEnd (inclusive) and DNS are required or
	// used in Stateful mode only. Prefix is the link's prefix (/64 to
	// /120); the pool lies inside it, within one /64, and reservations
	// (Decision.Address) must lie in Prefix.
	Prefix    netip.Prefix
	PoolStart netip.Addr
	PoolEnd   netip.Addr
	DNS       []netip.Addr
	// PreferredLifetime and ValidLifetime are the addresses' lifetimes
	// (defaults DefaultPreferredLifetime and DefaultValidLifetime, at
	// least a minute, preferred at most valid); T1 and T2 are half and
	// four fifths of the preferred lifetime.
	PreferredLifetime time.Duration
	ValidLifetime     time.Duration
	// Preference is option 7 in Advertise messages (255: the client
	// takes this server's at once); 0 sends none.
	Preference uint8
	// OfferHold is how long an advertised address stays kept for the
	// client (default DefaultOfferHold); DeclineHold how long an address
	// a client declined is not handed out (default DefaultDeclineHold).
	OfferHold   time.Duration
	DeclineHold time.Duration

	// Decider says what each client boots (required).
	Decider Decider
	// Observer receives the DHCP stage records; nil records nothing.
	Observer stage.Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock times leases (default clock.System()).
	Clock clock.Clock

	// MaxLeases bounds the lease table (default the larger of
	// DefaultMaxLeases and the pool size); MaxLearned the DUIDs
	// remembered with their MAC (default DefaultMaxLearned, oldest
	// forgotten first).
	MaxLeases  int
	MaxLearned int
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

func (e *ConfigError) Error() string { return "dhcp6: Options." + e.Field + ": " + e.Problem }

// Errors Reply wraps, for what callers and metrics branch on.
var (
	// ErrPoolExhausted: no free address for a client (the pool, or the
	// lease table's MaxLeases, is full).
	ErrPoolExhausted = errors.New("dhcp6: address pool exhausted")
	// ErrAddressInUse: a client's reserved address is leased to another
	// client.
	ErrAddressInUse = errors.New("dhcp6: reserved address leased to another client")
)

// DecisionError is a Decision the server cannot send.
type DecisionError struct {
	MAC     string
	Node    string
	Field   string // the Decision field
	Problem string
}

func (e *DecisionError) Error() string {
	return fmt.Sprintf("dhcp6: decision for %s (node %q): %s: %s", e.MAC, e.Node, e.Field, e.Problem)
}

// Server is the DHCPv6 server. It is safe for concurrent use: Reply,
// Serve and ServeConn may run at once on one Server, and share its lease
// table and learned DUIDs.
type Server struct {
	opts     Options
	log      *slog.Logger
	leases   *leaseTable // Stateful only
	learned  *duidBook
	metrics  *metrics
	serverID dhcpv6.DUID
	sidBytes []byte
}

// New validates opts, fills in the defaults and returns a Server.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: newMetrics(), learned: newDUIDBook(opts.MaxLearned)}
	s.serverID = opts.ServerDUID
	if s.serverID == nil {
		s.serverID = DefaultServerDUID(opts.ServerAddr)
	}
	s.sidBytes = s.serverID.ToBytes()
	if opts.Mode == Stateful {
		s.leases = newLeaseTable(opts)
	}
	return s, nil
}

// duidNamespace is the UUID namespace of DefaultServerDUID.
var duidNamespace = uuid.MustParse("6f1c3a52-8d0e-4b6a-9a61-3e2f6d0b7c41")

// DefaultServerDUID is the DUID a server at addr takes when Options
// names none: a DUID-UUID (RFC 6355) made from addr by name (SHA-1), so
// the same address gives the same DUID after a restart or on another
// host taking over the address.
func DefaultServerDUID(addr netip.Addr) dhcpv6.DUID {
	return &dhcpv6.DUIDUUID{UUID: uuid.NewSHA1(duidNamespace, []byte("anvil-dhcp6/"+addr.String()))}
}

// ServerDUID is the DUID the server answers with (option 2).
func (s *Server) ServerDUID() dhcpv6.DUID { return s.serverID }

func (o *Options) validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if o.Mode != Stateful && o.Mode != Proxy {
		return bad("Mode", "%q is neither %q nor %q", o.Mode, Stateful, Proxy)
	}
	if len(o.Interface) > 15 {
		return bad("Interface", "%q is longer than an interface name (15)", o.Interface)
	}
	if o.ServerAddr.IsValid() {
		o.ServerAddr = o.ServerAddr.Unmap()
		if !o.ServerAddr.Is6() || o.ServerAddr.IsUnspecified() || o.ServerAddr.IsMulticast() || o.ServerAddr.IsLinkLocalUnicast() || o.ServerAddr.Zone() != "" {
			return bad("ServerAddr", "%v is not a global or unique local IPv6 unicast address", o.ServerAddr)
		}
	}
	if o.ServerDUID == nil && !o.ServerAddr.IsValid() {
		return bad("ServerDUID", "is nil and there is no ServerAddr to derive a stable one from")
	}
	if o.ServerDUID != nil {
		if n := len(o.ServerDUID.ToBytes()); n < 3 || n > 130 {
			return bad("ServerDUID", "%d bytes; a DUID has 3 to 130 (RFC 8415 section 11.1)", n)
		}
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
	for _, d := range []struct {
		p          *time.Duration
		def, least time.Duration
		field      string
	}{
		{&o.PreferredLifetime, DefaultPreferredLifetime, time.Minute, "PreferredLifetime"},
		{&o.ValidLifetime, DefaultValidLifetime, time.Minute, "ValidLifetime"},
		{&o.OfferHold, DefaultOfferHold, time.Second, "OfferHold"},
		{&o.DeclineHold, DefaultDeclineHold, time.Second, "DeclineHold"},
	} {
		switch {
		case *d.p == 0:
			*d.p = d.def
		case *d.p < d.least:
			return bad(d.field, "%v is shorter than %v", *d.p, d.least)
		case *d.p > 0xffffffff*time.Second:
			return bad(d.field, "%v does not fit 32-bit seconds", *d.p)
		}
	}
	if o.PreferredLifetime > o.ValidLifetime {
		return bad("PreferredLifetime", "%v is longer than ValidLifetime %v", o.PreferredLifetime, o.ValidLifetime)
	}
	switch {
	case o.MaxPacketSize == 0:
		o.MaxPacketSize = DefaultMaxPacketSize
	case o.MaxPacketSize < MinPacketSize || o.MaxPacketSize > 65527:
		return bad("MaxPacketSize", "%d is outside %d..65527", o.MaxPacketSize, MinPacketSize)
	}
	switch {
	case o.Workers == 0:
		o.Workers = DefaultWorkers
	case o.Workers < 0 || o.Workers > 64:
		return bad("Workers", "%d is outside 1..64", o.Workers)
	}
	switch {
	case o.MaxLearned == 0:
		o.MaxLearned = DefaultMaxLearned
	case o.MaxLearned < 1 || o.MaxLearned > 1<<20:
		return bad("MaxLearned", "%d is outside 1..%d", o.MaxLearned, 1<<20)
	}
	if o.Mode == Stateful {
		return o.validatePool()
	}
	return nil
}

func (o *Options) validatePool() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if !o.Prefix.IsValid() || !o.Prefix.Addr().Is6() || o.Prefix.Addr().Is4In6() || o.Prefix.Bits() < 64 || o.Prefix.Bits() > 120 {
		return bad("Prefix", "%v is not an IPv6 prefix of /64 to /120 (required in stateful mode)", o.Prefix)
	}
	o.Prefix = o.Prefix.Masked()
	in := func(a netip.Addr) bool {
		return a.Is6() && a.Zone() == "" && o.Prefix.Contains(a) && a != o.Prefix.Addr()
	}
	if !in(o.PoolStart) {
		return bad("PoolStart", "%v is not a host address of Prefix %v", o.PoolStart, o.Prefix)
	}
	if !in(o.PoolEnd) {
		return bad("PoolEnd", "%v is not a host address of Prefix %v", o.PoolEnd, o.Prefix)
	}
	if o.PoolStart.Compare(o.PoolEnd) > 0 {
		return bad("PoolEnd", "%v is before PoolStart %v", o.PoolEnd, o.PoolStart)
	}
	if size := poolSize(o.PoolStart, o.PoolEnd); size > MaxPoolSize {
		return bad("PoolEnd", "pool %v..%v has more than %d addresses", o.PoolStart, o.PoolEnd, MaxPoolSize)
	}
	if o.ServerAddr.IsValid() {
		if !o.Prefix.Contains(o.ServerAddr) {
			return bad("ServerAddr", "%v is not in Prefix %v", o.ServerAddr, o.Prefix)
		}
		if o.ServerAddr.Compare(o.PoolStart) >= 0 && o.ServerAddr.Compare(o.PoolEnd) <= 0 {
			return bad("PoolStart", "pool %v..%v contains ServerAddr %v", o.PoolStart, o.PoolEnd, o.ServerAddr)
		}
	}
	for i, d := range o.DNS {
		if !d.Is6() || d.Is4In6() || d.IsUnspecified() || d.IsMulticast() {
			return bad(fmt.Sprintf("DNS[%d]", i), "%v is not an IPv6 unicast address", d)
		}
	}
	pool := int(poolSize(o.PoolStart, o.PoolEnd))
	switch {
	case o.MaxLeases == 0:
		o.MaxLeases = max(DefaultMaxLeases, pool)
	case o.MaxLeases < 1 || o.MaxLeases > 1<<20:
		return bad("MaxLeases", "%d is outside 1..%d", o.MaxLeases, 1<<20)
	}
	return nil
}

// poolSize is the number of addresses in start..end, or MaxPoolSize+1
// when they differ in their first 64 bits or more than that apart.
func poolSize(start, end netip.Addr) uint64 {
	a, b := start.As16(), end.As16()
	if !bytes.Equal(a[:8], b[:8]) {
		return MaxPoolSize + 1
	}
	lo, hi := low64(start), low64(end)
	if hi < lo || hi-lo >= MaxPoolSize {
		return MaxPoolSize + 1
	}
	return hi - lo + 1
}

func low64(a netip.Addr) uint64 {
	b := a.As16()
	var n uint64
	for _, x := range b[8:] {
		n = n<<8 | uint64(x)
	}
	return n
}

// record sends a stage record to the Observer, if any.
func (s *Server) record(r stage.Record) {
	if s.opts.Observer == nil {
		return
	}
	r.At = s.opts.Clock.Now()
	s.opts.Observer.ObserveBootStage(r)
}

// Learn tells the server that the client with DUID duid (its option 1
// bytes) has the Ethernet address mac (six hexadecimal octets separated
// by colons or hyphens), for clients whose requests carry no MAC the server can read:
// a relayed client behind a relay that adds no option 79, with a DUID
// that is not link-layer. The server also learns by itself each DUID it
// found a MAC for. Learn fails on a MAC that is not 6 bytes or an
// empty DUID.
func (s *Server) Learn(duid []byte, mac string) error {
	hw, err := parseMAC(mac)
	if err != nil {
		return err
	}
	if len(duid) < 3 || len(duid) > 130 {
		return fmt.Errorf("dhcp6: Learn: a DUID of %d bytes; want 3 to 130", len(duid))
	}
	s.learned.put(hex.EncodeToString(duid), hw)
	return nil
}

// duidBook remembers DUIDs with their MAC, bounded, oldest forgotten
// first.
type duidBook struct {
	mu    sync.Mutex
	max   int
	m     map[string]string
	order []string
	next  int
}

func newDUIDBook(max int) *duidBook { return &duidBook{max: max, m: make(map[string]string, 64)} }

func (b *duidBook) put(duid, mac string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[duid]; ok {
		b.m[duid] = mac
		return
	}
	if len(b.order) < b.max {
		b.order = append(b.order, duid)
	} else {
		delete(b.m, b.order[b.next])
		b.order[b.next] = duid
		b.next = (b.next + 1) % b.max
	}
	b.m[duid] = mac
}

func (b *duidBook) get(duid string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	mac, ok := b.m[duid]
	return mac, ok
}
