package dhcp6

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Lease is an address the server advertised or leased to a client.
type Lease struct {
	MAC  string
	Addr netip.Addr
	// Bound is true once the client requested the address (a Reply to
	// its Request); false while it is only advertised.
	Bound   bool
	Expires time.Time
}

// lease is a lease table entry. An entry outlives its expiry: the table
// remembers which address a client had, so that it gets it back, until
// another client needs the address.
type lease struct {
	mac     string
	addr    uint64 // the low 64 bits; the high ones are the prefix's
	bound   bool
	expires time.Time
}

func (l *lease) active(now time.Time) bool { return now.Before(l.expires) }

// leaseTable is the stateful mode's in-memory lease table, keyed by the
// client's MAC: a machine keeps its address from its firmware's DUID to
// iPXE's to the ramdisk's. The invariant: byAddr[l.addr] == l for every l
// in byMAC, and the reverse.
type leaseTable struct {
	mu          sync.Mutex
	high        [8]byte // the first 64 bits of every address
	start, end  uint64  // the pool, inclusive
	max         int
	offerHold   time.Duration
	leaseTime   time.Duration
	declineHold time.Duration
	byMAC       map[string]*lease
	byAddr      map[uint64]*lease
	declined    map[uint64]time.Time
	next        uint64
}

func newLeaseTable(o Options) *leaseTable {
	b := o.PoolStart.As16()
	t := &leaseTable{
		start:       low64(o.PoolStart),
		end:         low64(o.PoolEnd),
		max:         o.MaxLeases,
		offerHold:   o.OfferHold,
		leaseTime:   o.ValidLifetime,
		declineHold: o.DeclineHold,
		byMAC:       make(map[string]*lease),
		byAddr:      make(map[uint64]*lease),
		declined:    make(map[uint64]time.Time),
	}
	copy(t.high[:], b[:8])
	t.next = t.start
	return t
}

func (t *leaseTable) addr(n uint64) netip.Addr {
	var b [16]byte
	copy(b[:8], t.high[:])
	for i := 15; i >= 8; i-- {
		b[i] = byte(n)
		n >>= 8
	}
	return netip.AddrFrom16(b)
}

// num is a's low 64 bits, and whether a shares the table's high ones.
func (t *leaseTable) num(a netip.Addr) (uint64, bool) {
	if !a.Is6() || a.Is4In6() {
		return 0, false
	}
	b := a.As16()
	return low64(a), [8]byte(b[:8]) == t.high
}

func (t *leaseTable) inPool(a netip.Addr) bool {
	n, ok := t.num(a)
	return ok && n >= t.start && n <= t.end
}

// current returns the address the table holds for mac, or the zero Addr.
func (t *leaseTable) current(mac string) netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.byMAC[mac]; l != nil {
		return t.addr(l.addr)
	}
	return netip.Addr{}
}

// offer picks the address to advertise to mac and holds it for
// offerHold: its reservation; else the address it had; else the one it
// asks for (an IA Address hint) when free; else a free pool address,
// reclaiming the oldest expired one only when no address was never used.
func (t *leaseTable) offer(mac string, reserved, hint netip.Addr, now time.Time) (netip.Addr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if reserved.IsValid() {
		n, _ := t.num(reserved)
		if h := t.byAddr[n]; h != nil && h.mac != mac && h.active(now) {
			return netip.Addr{}, fmt.Errorf("dhcp6: %v reserved for %s is leased to %s: %w", reserved, mac, h.mac, ErrAddressInUse)
		}
		if err := t.assign(mac, n, false, now.Add(t.offerHold), now); err != nil {
			return netip.Addr{}, err
		}
		return reserved, nil
	}
	if l := t.byMAC[mac]; l != nil && l.addr >= t.start && l.addr <= t.end && !t.isDeclined(l.addr, now) {
		if err := t.assign(mac, l.addr, l.bound, later(l.expires, now.Add(t.offerHold)), now); err != nil {
			return netip.Addr{}, err
		}
		return t.addr(l.addr), nil
	}
	if n, ok := t.num(hint); ok && n >= t.start && n <= t.end && t.byAddr[n] == nil && !t.isDeclined(n, now) {
		if err := t.assign(mac, n, false, now.Add(t.offerHold), now); err != nil {
			return netip.Addr{}, err
		}
		return hint, nil
	}
	n, ok := t.free(now)
	if !ok {
		return netip.Addr{}, fmt.Errorf("dhcp6: no address for %s in %v..%v: %w", mac, t.addr(t.start), t.addr(t.end), ErrPoolExhausted)
	}
	if err := t.assign(mac, n, false, now.Add(t.offerHold), now); err != nil {
		return netip.Addr{}, err
	}
	return t.addr(n), nil
}

// free finds a pool address: first one nobody ever had, then one whose
// lease expired (the oldest expiry wins).
func (t *leaseTable) free(now time.Time) (uint64, bool) {
	size := t.end - t.start + 1
	var oldest *lease
	for i := uint64(0); i < size; i++ {
		n := t.start + (t.next-t.start+i)%size
		if t.isDeclined(n, now) {
			continue
		}
		h := t.byAddr[n]
		if h == nil {
			t.next = t.start + (n-t.start+1)%size
			return n, true
		}
		if !h.active(now) && (oldest == nil || h.expires.Before(oldest.expires)) {
			oldest = h
		}
	}
	if oldest == nil {
		return 0, false
	}
	return oldest.addr, true
}

// bind leases addr to mac for the valid lifetime (a Reply to a Request,
// Renew or Rebind). The caller decided the client may have addr; bind
// refuses only an address another client holds, or one declined.
func (t *leaseTable) bind(mac string, addr netip.Addr, now time.Time) (time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, _ := t.num(addr)
	if h := t.byAddr[n]; h != nil && h.mac != mac && h.active(now) {
		return time.Time{}, fmt.Errorf("dhcp6: %v is leased to %s, not %s: %w", addr, h.mac, mac, ErrAddressInUse)
	}
	if t.isDeclined(n, now) {
		return time.Time{}, fmt.Errorf("dhcp6: %v was declined by a client, not %s's: %w", addr, mac, ErrAddressInUse)
	}
	exp := now.Add(t.leaseTime)
	return exp, t.assign(mac, n, true, exp, now)
}

// assign points mac at n, dropping mac's earlier address and the earlier
// (expired) holder of n. It refuses a new client when the table is full
// of unexpired entries.
func (t *leaseTable) assign(mac string, n uint64, bound bool, expires, now time.Time) error {
	l := t.byMAC[mac]
	if l == nil {
		if len(t.byMAC) >= t.max {
			t.purge(now)
		}
		if len(t.byMAC) >= t.max {
			return fmt.Errorf("dhcp6: lease table full (%d clients) for %s: %w", t.max, mac, ErrPoolExhausted)
		}
		l = &lease{mac: mac}
		t.byMAC[mac] = l
	} else if l.addr != n {
		delete(t.byAddr, l.addr)
	}
	if h := t.byAddr[n]; h != nil && h != l {
		delete(t.byMAC, h.mac)
	}
	l.addr, l.bound, l.expires = n, bound, expires
	t.byAddr[n] = l
	return nil
}

// purge forgets expired entries and declines.
func (t *leaseTable) purge(now time.Time) {
	for mac, l := range t.byMAC {
		if !l.active(now) {
			delete(t.byMAC, mac)
			delete(t.byAddr, l.addr)
		}
	}
	for n, until := range t.declined {
		if !now.Before(until) {
			delete(t.declined, n)
		}
	}
}

func (t *leaseTable) isDeclined(n uint64, now time.Time) bool {
	until, ok := t.declined[n]
	if ok && !now.Before(until) {
		delete(t.declined, n)
		return false
	}
	return ok
}

// holds reports whether mac holds addr (advertised or leased, expired or
// not): a Renew or Rebind for it may be granted.
func (t *leaseTable) holds(mac string, addr netip.Addr) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.num(addr)
	l := t.byMAC[mac]
	return ok && l != nil && l.addr == n
}

// release ends mac's lease on addr; the table keeps remembering the
// address for mac.
func (t *leaseTable) release(mac string, addr netip.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.num(addr)
	l := t.byMAC[mac]
	if !ok || l == nil || l.addr != n {
		return false
	}
	l.bound, l.expires = false, now
	return true
}

// decline marks addr unusable for declineHold (another host answers on
// it) and forgets mac's lease on it.
func (t *leaseTable) decline(mac string, addr netip.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.num(addr)
	l := t.byMAC[mac]
	if !ok || l == nil || l.addr != n {
		return false
	}
	delete(t.byMAC, mac)
	delete(t.byAddr, n)
	t.declined[n] = now.Add(t.declineHold)
	return true
}

// snapshot lists the unexpired entries, by address.
func (t *leaseTable) snapshot(now time.Time) []Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Lease, 0, len(t.byMAC))
	for _, l := range t.byMAC {
		if l.active(now) {
			out = append(out, Lease{MAC: l.mac, Addr: t.addr(l.addr), Bound: l.bound, Expires: l.expires})
		}
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(low64(a.Addr), low64(b.Addr)) })
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
