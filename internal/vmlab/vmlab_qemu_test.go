package vmlab

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// TestIPXEBootsOverDnsmasq proves the harness against a boot server
// nobody here wrote: SeaBIOS runs the NIC's iPXE ROM, which gets an
// address and the script URL from dnsmasq and fetches script, kernel and
// initramfs from the Go HTTP server in the namespace; the initramfs prints
// the marker.
func TestIPXEBootsOverDnsmasq(t *testing.T) {
	n := NewTestNetwork(t)
	RunNetbootScenario(t, n, Scenario{
		Firmware: BIOS,
		Expect:   []stage.Stage{stage.DHCPDiscover, stage.DHCPOffer, stage.DHCPAck, stage.Script, stage.Kernel, stage.Ramdisk},
	}, DnsmasqBootServer(DnsmasqOptions{}))
}

// TestUEFIPXEBootsOverDnsmasq boots OVMF without the NIC's iPXE ROM:
// OVMF's own PXE gets snponly.efi over TFTP from dnsmasq, and that iPXE
// fetches the script over HTTP: the path of a UEFI machine whose firmware
// is not iPXE. The network sends router advertisements, so iPXE's
// configuration ends with DHCP (the BIOS test shows the wait without).
func TestUEFIPXEBootsOverDnsmasq(t *testing.T) {
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	RunNetbootScenario(t, n, Scenario{
		Firmware: UEFI,
		NoROM:    true,
		Expect:   []stage.Stage{stage.DHCPAck, stage.TFTPSent, stage.DHCPAck, stage.Script, stage.Kernel, stage.Ramdisk},
	}, DnsmasqBootServer(DnsmasqOptions{}))
}

// TestScenarioReportsWhereTheBootStopped serves no kernel: iPXE fetches
// the script and gives up, and the scenario fails at once (not at its
// timeout) with the server's records up to the script and iPXE's words.
func TestScenarioReportsWhereTheBootStopped(t *testing.T) {
	n := NewTestNetwork(t)
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunNetbootScenario(rec, n, Scenario{Firmware: BIOS}, DnsmasqBootServer(DnsmasqOptions{Missing: []string{"/vmlinuz"}}))
	}()
	<-done
	msg := rec.message()
	if rec.skipped {
		t.Skip(msg)
	}
	if msg == "" {
		t.Fatal("the scenario passed without a kernel")
	}
	for _, want := range []string{"the boot failed at", "DHCP acknowledged 192.0.2.", "boot script /boot.ipxe fetched", "vmlinuz"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "kernel downloaded") {
		t.Errorf("failure message claims a kernel download:\n%s", msg)
	}
	t.Logf("the scenario failed as it should:\n%s", firstLines(msg, 12))
}

// fatalRecorder stands in for t so that a test can check how
// RunNetbootScenario fails: Fatal and Skip record the message and end the
// scenario's goroutine; the rest goes to the real t.
type fatalRecorder struct {
	testing.TB
	mu      sync.Mutex
	msg     string
	skipped bool
}

func (r *fatalRecorder) record(skip bool, args ...any) {
	r.mu.Lock()
	r.msg, r.skipped = fmt.Sprint(args...), skip
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) { r.record(false, args...) }
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.record(false, fmt.Sprintf(format, args...))
}
func (r *fatalRecorder) Skip(args ...any) { r.record(true, args...) }
func (r *fatalRecorder) Skipf(format string, args ...any) {
	r.record(true, fmt.Sprintf(format, args...))
}
func (r *fatalRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.msg += fmt.Sprintf(format, args...) + "\n"
	r.mu.Unlock()
}

func (r *fatalRecorder) message() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
