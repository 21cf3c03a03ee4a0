package netboot

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// TestConcurrentUse runs the boot interfaces' writes against the DHCP,
// TFTP and HTTP sides' reads (go test -race is the check), then checks
// the MAC index matches the configurations.
func TestConcurrentUse(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	h := f.srv.Handler()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				mac := fmt.Sprintf("52:54:00:00:%02x:%02x", w, i%5)
				node := fmt.Sprintf("node-%d-%d", w, i%5)
				switch i % 3 {
				case 0:
					if err := f.srv.PutConfig(ctx, f.ramdiskConfig(node, IPXE, BIOS, mac)); err != nil {
						t.Error(err)
					}
				case 1:
					f.srv.DecideBoot(ctx, dhcp.Client{MAC: mac, Arch: dhcp.ArchBIOS, IPXE: true})
					get(t, h, http.MethodGet, ScriptPath(mac))
				case 2:
					if i%2 == 0 {
						f.srv.DeleteConfig(ctx, node)
					}
					f.srv.ObserveBootStage(dhcpOffer(mac, w, i))
				}
			}
		}()
	}
	wg.Wait()
	f.srv.mu.RLock()
	defer f.srv.mu.RUnlock()
	n := 0
	for node, c := range f.srv.configs {
		for _, m := range c.MACs {
			if f.srv.macs[m] != node {
				t.Errorf("MAC %s maps to %q, its configuration is %s's", m, f.srv.macs[m], node)
			}
			n++
		}
	}
	if n != len(f.srv.macs) {
		t.Errorf("%d MACs indexed, %d in configurations", len(f.srv.macs), n)
	}
}

func TestAddressBookIsBounded(t *testing.T) {
	b := newAddrBook(3)
	for i := 1; i <= 5; i++ {
		b.put(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), fmt.Sprintf("mac-%d", i), "")
	}
	for i := 1; i <= 5; i++ {
		_, ok := b.get(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}))
		if want := i > 2; ok != want {
			t.Errorf("192.0.2.%d present %v, want %v (the oldest go first)", i, ok, want)
		}
	}
	b.put(netip.AddrFrom4([4]byte{192, 0, 2, 5}), "mac-5b", "n")
	if e, _ := b.get(netip.MustParseAddr("::ffff:192.0.2.5")); e.mac != "mac-5b" || e.node != "n" {
		t.Errorf("updated entry %+v", e)
	}
	if len(b.m) != 3 {
		t.Errorf("%d entries, bound 3", len(b.m))
	}
}

func dhcpOffer(mac string, w, i int) stage.Record {
	return stage.Record{MAC: mac, Stage: stage.DHCPOffer, Addr: fmt.Sprintf("192.0.2.%d", 10+w*20+i%20)}
}
