package main

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"golang.org/x/net/bpf"
)

// TestMain lets the test binary be the benchmark's roles too: bench
// starts its own executable with -role in the namespaces.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-role" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestSmallStorm runs the harness end to end with 6 machines and small
// images, against Anvil and dnsmasq --no-ping with nginx: every machine
// gets its ramdisk from both, nothing is lost, and the report carries
// the ratios. It needs root, ip, dnsmasq, nginx and ipxe.
func TestSmallStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("bootstorm: starts servers in network namespaces")
	}
	const n, kernel, ramdisk = 6, 1 << 20, 2 << 20
	var reps []Report
	err := bench(context.Background(), benchOptions{
		counts: []int{n}, kernelSize: kernel, ramdiskSize: ramdisk, spread: 100 * time.Millisecond,
		servers: []string{"anvil", "dnsmasq-noping"}, timeout: 2 * time.Minute,
		log: slog.New(slog.DiscardHandler),
	}, func(r Report) error { reps = append(reps, r); return nil })
	var skip *skipError
	if errors.As(err, &skip) {
		t.Skip("bootstorm:", skip.why)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || len(reps[0].Runs) != 2 {
		t.Fatalf("reports: %+v", reps)
	}
	for _, r := range reps[0].Runs {
		s := r.Storm
		if s.PacketDrops != 0 {
			t.Errorf("%s: the machines' packet socket dropped %d frames", r.Server, s.PacketDrops)
		}
		if s.Done != n || s.Failed != 0 || s.DHCPLost != 0 {
			t.Errorf("%s: %d of %d machines booted, %d failed (%v), %d DHCP answers lost", r.Server, s.Done, n, s.Failed, s.Failures, s.DHCPLost)
		}
		if want := int64(n * (kernel + ramdisk)); s.HTTPBytes < want {
			t.Errorf("%s: %d bytes over HTTP, want at least the images' %d", r.Server, s.HTTPBytes, want)
		}
		if s.TFTPBytes == 0 || r.Processes == 0 || r.ServerRSSMiB == 0 {
			t.Errorf("%s: TFTP bytes %d, processes %d, RSS %.1f MiB: want all measured", r.Server, s.TFTPBytes, r.Processes, r.ServerRSSMiB)
		}
	}
	if rt := reps[0].Ratios["dnsmasq --no-ping+nginx"]; rt["time_until_all_ramdisks_s"] <= 0 {
		t.Errorf("ratios: %v", reps[0].Ratios)
	}
}

// TestDHCPFilter runs the packet socket's filter on frames: only
// unfragmented IPv4 UDP to port 68 passes, so the machines' TFTP and
// HTTP traffic never reaches (and never fills) the DHCP socket.
func TestDHCPFilter(t *testing.T) {
	vm, err := bpf.NewVM(dhcpProgram())
	if err != nil {
		t.Fatal(err)
	}
	frame := func(ethType uint16, proto byte, frag uint16, ihl int, dport uint16) []byte {
		f := make([]byte, 14+ihl+8+300)
		binary.BigEndian.PutUint16(f[12:], ethType)
		f[14] = 0x40 | byte(ihl/4)
		binary.BigEndian.PutUint16(f[14+6:], frag)
		f[14+9] = proto
		binary.BigEndian.PutUint16(f[14+ihl+2:], dport)
		return f
	}
	for _, c := range []struct {
		name string
		f    []byte
		pass bool
	}{
		{"dhcp answer", frame(0x0800, 17, 0, 20, 68), true},
		{"dhcp answer, IP options", frame(0x0800, 17, 0, 24, 68), true},
		{"tcp", frame(0x0800, 6, 0, 20, 68), false},
		{"udp to tftp", frame(0x0800, 17, 0, 20, 69), false},
		{"fragment", frame(0x0800, 17, 0x0010, 20, 68), false},
		{"arp", frame(0x0806, 17, 0, 20, 68), false},
	} {
		n, err := vm.Run(c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (n > 0) != c.pass {
			t.Errorf("%s: filter kept %d bytes, want pass=%v", c.name, n, c.pass)
		}
	}
}
