package netboot

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anvilmetal/anvil/netboot/dhcp"
)

// BenchmarkDecideBoot is the decision on the DHCP packet path, for a
// fleet of 1000 configured MACs.
func BenchmarkDecideBoot(b *testing.B) {
	f := newFixture(b, nil)
	macs := make([]string, 1000)
	for i := range macs {
		macs[i] = fmt.Sprintf("52:54:00:00:%02x:%02x", i/256, i%256)
		f.put(b, f.ramdiskConfig(fmt.Sprintf("node-%d", i), IPXE, UEFI, macs[i]))
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		d := f.srv.DecideBoot(ctx, dhcp.Client{MAC: macs[i%len(macs)], Arch: dhcp.ArchEFIx64, PXEClient: true})
		if d.BootFile == "" {
			b.Fatal("no boot file")
		}
	}
}

// BenchmarkHTTPRamdisk is the HTTP side serving a 50 MiB ramdisk over
// loopback to one client.
func BenchmarkHTTPRamdisk(b *testing.B) {
	f := newFixture(b, nil)
	writeFile(b, f.ramdisk, pattern(50<<20))
	f.put(b, f.ramdiskConfig("node-1", IPXE, UEFI, "52:54:00:12:34:56"))
	srv := httptest.NewServer(f.srv.Handler())
	defer srv.Close()
	url := srv.URL + RamdiskPath("52:54:00:12:34:56")
	b.SetBytes(50 << 20)
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != 50<<20 {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
}
