package dhcp

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Lease is an address the server offered or leased to a client.
type Lease struct {
	MAC  string
	Addr netip.Addr
	// Bound is true once the client requested the address (DHCPACK);
	// false while it is only offered.
	Bound   bool
	Expires time.Time
}

// lease is a lease table entry. An entry outlives its expiry: the table
// remembers which address a client had, so that it gets it back, until
// another client needs the address.
type lease struct {
	mac     string
	addr    uint32
	bound   bool
	expires time.Time
}

func (l *lease) active(now time.Time) bool { return now.Before(l.expires) }

// leaseTable is the authoritative mode's in-memory lease table. The
// invariant: byAddr[l.addr] == l for every l in byMAC, and the reverse.
type leaseTable struct {
	mu          sync.Mutex
	start, end  uint32 // the pool, inclusive
	skip        uint32 // an address in the pool never handed out (the router), or 0
	max         int
	offerHold   time.Duration
	leaseTime   time.Duration
	declineHold time.Duration
	byMAC       map[string]*lease
	byAddr      map[uint32]*lease
	declined    map[uint32]time.Time
	next        uint32 // where the next pool scan starts
}

func newLeaseTable(o Options) *leaseTable {
	t := &leaseTable{
		start:       addrNum(o.PoolStart),
		end:         addrNum(o.PoolEnd),
		max:         o.MaxLeases,
		offerHold:   o.OfferHold,
		leaseTime:   o.LeaseTime,
		declineHold: o.DeclineHold,
		byMAC:       make(map[string]*lease),
		byAddr:      make(map[uint32]*lease),
		declined:    make(map[uint32]time.Time),
	}
	if r := addrNum(o.Router); r >= t.start && r <= t.end {
		t.skip = r
	}
	t.next = t.start
	return t
}

func (t *leaseTable) inPool(a uint32) bool { return a >= t.start && a <= t.end && a != t.skip }

// current returns the address the table holds for mac (offered or
// leased, expired or not), or 0.
func (t *leaseTable) current(mac string) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.byMAC[mac]; l != nil {
		return l.addr
	}
	return 0
}

// offer picks the address to offer mac and holds it for offerHold: its
// reservation; else the address it had; else the one it asks for (option
// 50) when free; else a free pool address, reclaiming the oldest
// client's expired one only when no address was never used.
func (t *leaseTable) offer(mac string, reserved, requested netip.Addr, now time.Time) (netip.Addr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if reserved.IsValid() {
		a := addrNum(reserved)
		if h := t.byAddr[a]; h != nil && h.mac != mac && h.active(now) {
			return netip.Addr{}, fmt.Errorf("dhcp: %v reserved for %s is leased to %s: %w", reserved, mac, h.mac, ErrAddressInUse)
		}
		if err := t.assign(mac, a, false, now.Add(t.offerHold), now); err != nil {
			return netip.Addr{}, err
		}
		return reserved, nil
	}
	if l := t.byMAC[mac]; l != nil && t.inPool(l.addr) && !t.isDeclined(l.addr, now) {
		if err := t.assign(mac, l.addr, l.bound, later(l.expires, now.Add(t.offerHold)), now); err != nil {
			return netip.Addr{}, err
		}
		return numAddr(l.addr), nil
	}
	if r := addrNum(requested); requested.Is4() && t.inPool(r) && t.byAddr[r] == nil && !t.isDeclined(r, now) {
		if err := t.assign(mac, r, false, now.Add(t.offerHold), now); err != nil {
			return netip.Addr{}, err
		}
		return requested, nil
	}
	a, ok := t.free(now)
	if !ok {
		return netip.Addr{}, fmt.Errorf("dhcp: no address for %s in %v..%v: %w", mac, numAddr(t.start), numAddr(t.end), ErrPoolExhausted)
	}
	if err := t.assign(mac, a, false, now.Add(t.offerHold), now); err != nil {
		return netip.Addr{}, err
	}
	return numAddr(a), nil
}

// free finds a pool address: first one nobody ever had, then one whose
// lease expired (the oldest expiry wins).
func (t *leaseTable) free(now time.Time) (uint32, bool) {
	size := t.end - t.start + 1
	var oldest *lease
	for i := uint32(0); i < size; i++ {
		a := t.start + (t.next-t.start+i)%size
		if a == t.skip || t.isDeclined(a, now) {
			continue
		}
		h := t.byAddr[a]
		if h == nil {
			t.next = t.start + (a-t.start+1)%size
			return a, true
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

// bind leases addr to mac for leaseTime (DHCPACK). The caller decided the
// request may have addr; bind refuses only an address another client
// holds, or one that was declined.
func (t *leaseTable) bind(mac string, addr netip.Addr, now time.Time) (time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := addrNum(addr)
	if h := t.byAddr[a]; h != nil && h.mac != mac && h.active(now) {
		return time.Time{}, fmt.Errorf("dhcp: %v is leased to %s, not %s: %w", addr, h.mac, mac, ErrAddressInUse)
	}
	if t.isDeclined(a, now) {
		return time.Time{}, fmt.Errorf("dhcp: %v was declined by a client, not %s's: %w", addr, mac, ErrAddressInUse)
	}
	exp := now.Add(t.leaseTime)
	return exp, t.assign(mac, a, true, exp, now)
}

// assign points mac at a, dropping mac's earlier address and the
// earlier (expired) holder of a. It refuses a new client when the table
// is full of unexpired entries.
func (t *leaseTable) assign(mac string, a uint32, bound bool, expires, now time.Time) error {
	l := t.byMAC[mac]
	if l == nil {
		if len(t.byMAC) >= t.max {
			t.purge(now)
		}
		if len(t.byMAC) >= t.max {
			return fmt.Errorf("dhcp: lease table full (%d clients) for %s: %w", t.max, mac, ErrPoolExhausted)
		}
		l = &lease{mac: mac}
		t.byMAC[mac] = l
	} else if l.addr != a {
		delete(t.byAddr, l.addr)
	}
	if h := t.byAddr[a]; h != nil && h != l {
		delete(t.byMAC, h.mac)
	}
	l.addr, l.bound, l.expires = a, bound, expires
	t.byAddr[a] = l
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
	for a, until := range t.declined {
		if !now.Before(until) {
			delete(t.declined, a)
		}
	}
}

func (t *leaseTable) isDeclined(a uint32, now time.Time) bool {
	until, ok := t.declined[a]
	if ok && !now.Before(until) {
		delete(t.declined, a)
		return false
	}
	return ok
}

// release ends mac's lease on addr (DHCPRELEASE); the table keeps
// remembering the address for mac.
func (t *leaseTable) release(mac string, addr netip.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byMAC[mac]
	if l == nil || l.addr != addrNum(addr) {
		return false
	}
	l.bound, l.expires = false, now
	return true
}

// cancelOffer drops an unbound offer to mac (the client chose another
// server), so that the address is free at once.
func (t *leaseTable) cancelOffer(mac string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.byMAC[mac]; l != nil && !l.bound {
		l.expires = now
	}
}

// decline marks addr unusable for declineHold (another host answers on
// it) and forgets mac's lease on it.
func (t *leaseTable) decline(mac string, addr netip.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := addrNum(addr)
	l := t.byMAC[mac]
	if l == nil || l.addr != a {
		return false
	}
	delete(t.byMAC, mac)
	delete(t.byAddr, a)
	t.declined[a] = now.Add(t.declineHold)
	return true
}

// snapshot lists the unexpired entries, by address.
func (t *leaseTable) snapshot(now time.Time) []Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Lease, 0, len(t.byMAC))
	for _, l := range t.byMAC {
		if l.active(now) {
			out = append(out, Lease{MAC: l.mac, Addr: numAddr(l.addr), Bound: l.bound, Expires: l.expires})
		}
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(addrNum(a.Addr), addrNum(b.Addr)) })
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
