package netboot

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
)

func readTFTP(t *testing.T, s *Server, name string) ([]byte, error) {
	t.Helper()
	f, err := s.OpenTFTP(context.Background(), &tftp.Request{Filename: name,
		Remote: netip.MustParseAddrPort("192.0.2.23:2070"), Local: netip.MustParseAddrPort("192.0.2.1:69")})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return b, nil
}

func TestTFTPFiles(t *testing.T) {
	f := newFixture(t, nil)
	f.put(t, f.ramdiskConfig("node-1", PXE, BIOS, "52:54:00:12:34:56"))
	f.put(t, f.ramdiskConfig("node-2", PXE, UEFI, "52:54:00:12:34:57"))
	f.put(t, Config{Node: "node-3", MACs: []string{"52:54:00:12:34:58"}, Interface: PXE, Mode: BIOS, Action: LocalDisk})
	f.put(t, f.ramdiskConfig("node-4", IPXE, BIOS, "52:54:00:12:34:59"))

	found := map[string]string{
		"undionly.kpxe":  "undionly.kpxe\n",
		"snponly.efi":    "snponly.efi\n",
		"ipxe.efi":       "ipxe.efi\n",
		"pxelinux.0":     "pxelinux.0\n",
		"ldlinux.c32":    "ldlinux.c32\n",
		"grubnetx64.efi": "grubnetx64.efi\n",
	}
	for name, want := range found {
		if got, err := readTFTP(t, f.srv, name); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	cfg, err := readTFTP(t, f.srv, "pxelinux.cfg/01-52-54-00-12-34-56")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "pxelinux-ramdisk-bios.cfg", cfg)
	local, err := readTFTP(t, f.srv, "pxelinux.cfg/01-52-54-00-12-34-58")
	if err != nil {
		t.Fatal(err)
	}
	if want := pxelinuxConfig(Config{Node: "node-3", Action: LocalDisk}, "52:54:00:12:34:58"); string(local) != string(want) {
		t.Errorf("local pxelinux config:\n%s", local)
	}
	grub, err := readTFTP(t, f.srv, "boot/52:54:00:12:34:57/grub.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if byName, _ := readTFTP(t, f.srv, "grub/grub.cfg-01-52-54-00-12-34-57"); string(byName) != string(grub) {
		t.Errorf("GRUB's own per-MAC name serves something else:\n%s", byName)
	}
	if master, err := readTFTP(t, f.srv, "grub/grub.cfg"); err != nil || string(master) != string(grubMaster()) {
		t.Errorf("grub/grub.cfg: %q, %v", master, err)
	}
	if k, err := readTFTP(t, f.srv, "boot/52-54-00-12-34-56/kernel"); err != nil || len(k) != 10000 {
		t.Errorf("kernel: %d bytes, %v", len(k), err)
	}
	if r, err := readTFTP(t, f.srv, "boot/52-54-00-12-34-56/ramdisk"); err != nil || len(r) != 300000 {
		t.Errorf("ramdisk: %d bytes, %v", len(r), err)
	}

	for _, name := range []string{
		"pxelinux.cfg/default", "pxelinux.cfg/C000021", "pxelinux.cfg/01-52-54-00-12-34-99",
		"pxelinux.cfg/01-52-54-00-12-34-59",                         // an ipxe node
		"grub/x86_64-efi/grub.cfg", "boot/52-54-00-12-34-58/kernel", // local disk: no kernel
		"boot/52-54-00-12-34-99/kernel", "etc/passwd", "../etc/passwd", "", "images/vmlinuz",
	} {
		if _, err := readTFTP(t, f.srv, name); !errors.Is(err, tftp.ErrNotFound) {
			t.Errorf("%q: %v, want ErrNotFound", name, err)
		}
	}
}

func TestTFTPTransferRecords(t *testing.T) {
	f := newFixture(t, nil)
	f.put(t, f.ramdiskConfig("node-1", PXE, BIOS, "52:54:00:12:34:56"))
	f.put(t, Config{Node: "node-3", MACs: []string{"52:54:00:12:34:58"}, Interface: PXE, Mode: BIOS, Action: LocalDisk})
	f.srv.ObserveBootStage(stage.Record{Node: "node-1", MAC: "52:54:00:12:34:56", Stage: stage.DHCPAck, Addr: "192.0.2.23"})
	before := len(f.rec.Records())
	remote := netip.MustParseAddrPort("192.0.2.23:2070")
	xfer := func(name string, n int64, err error) {
		f.srv.OnTransfer(tftp.Transfer{Request: tftp.Request{Filename: name, Remote: remote}, Bytes: n,
			Duration: 250 * time.Millisecond, BlockSize: 1468, Err: err})
	}
	xfer("pxelinux.0", 42000, nil)
	xfer("ldlinux.c32", 120000, nil)
	xfer("pxelinux.cfg/C0000217", 0, tftp.ErrNotFound) // a probe: not recorded
	xfer("pxelinux.cfg/01-52-54-00-12-34-56", 300, nil)
	xfer("boot/52-54-00-12-34-56/kernel", 10000, nil)
	xfer("boot/52-54-00-12-34-56/ramdisk", 4000, errors.New("timeout waiting for ACK of block 3"))
	xfer("boot/52-54-00-12-34-56/ramdisk", 300000, nil)
	xfer("pxelinux.cfg/01-52-54-00-12-34-58", 90, nil)

	recs := f.rec.Records()[before:]
	want := "tftp sent,tftp sent,boot script,kernel,tftp failed,ramdisk,local boot"
	if got := stages(recs); got != want {
		t.Fatalf("stages %s, want %s", got, want)
	}
	for i, r := range recs[:6] {
		if r.Node != "node-1" || r.MAC != "52:54:00:12:34:56" || r.Addr != "192.0.2.23" {
			t.Errorf("record %d %+v: want node-1's", i, r)
		}
	}
	if recs[0].Bytes != 42000 || recs[0].Duration != 250*time.Millisecond || recs[0].File != "pxelinux.0" {
		t.Errorf("record %+v", recs[0])
	}
	if recs[4].Err == "" {
		t.Errorf("failed transfer without its error: %+v", recs[4])
	}
	if recs[6].Node != "node-3" {
		t.Errorf("local boot record %+v", recs[6])
	}
	// The stall check reads these records: after the ramdisk, the agent.
	all := append([]stage.Record{{Node: "node-1", Stage: stage.Prepared, At: testTime.Add(-time.Minute)}}, recs[:6]...)
	st, stalled := stage.Check(all, testTime.Add(11*time.Minute), stage.Deadlines{})
	if !stalled || st.Waiting != "agent lookup" {
		t.Errorf("Check = %+v, %v", st, stalled)
	}
}

func TestTFTPRecordWithoutRemote(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.OnTransfer(tftp.Transfer{Request: tftp.Request{Filename: "undionly.kpxe"}, Bytes: 1000})
	recs := f.rec.Records()
	if len(recs) != 1 || recs[0].Addr != "" || recs[0].Stage != stage.TFTPSent {
		t.Errorf("records %+v: want one tftp sent without an address", recs)
	}
}
