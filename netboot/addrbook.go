package netboot

import (
	"net/netip"
	"sync"
)

// addrBookSize bounds the address book: a provisioning network of a few
// thousand machines booting at once fits; beyond it the oldest entries
// go first (their records then lack the MAC, nothing worse).
const addrBookSize = 4096

type addrEntry struct{ mac, node string }

// addrBook remembers the MAC and node of the addresses the DHCP server
// handed out, bounded, oldest evicted first.
type addrBook struct {
	mu    sync.Mutex
	max   int
	m     map[netip.Addr]addrEntry
	order []netip.Addr // insertion order, a ring of max entries
	next  int
}

func newAddrBook(max int) addrBook {
	return addrBook{max: max, m: make(map[netip.Addr]addrEntry, 64)}
}

func (b *addrBook) put(a netip.Addr, mac, node string) {
	a = a.Unmap()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[a]; ok {
		b.m[a] = addrEntry{mac, node}
		return
	}
	if len(b.order) < b.max {
		b.order = append(b.order, a)
	} else {
		delete(b.m, b.order[b.next])
		b.order[b.next] = a
		b.next = (b.next + 1) % b.max
	}
	b.m[a] = addrEntry{mac, node}
}

func (b *addrBook) get(a netip.Addr) (addrEntry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[a.Unmap()]
	return e, ok
}
