package netboot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
)

// TestRunServesTFTPAndHTTPUntilCancelled runs the composed server on
// loopback: the iPXE binary over TFTP and the node's script over HTTP,
// both recorded, and every socket closed when the context ends.
func TestRunServesTFTPAndHTTPUntilCancelled(t *testing.T) {
	f := newFixture(t, nil)
	mac := "52:54:00:aa:bb:01"
	f.put(t, f.ramdiskConfig("node-1", IPXE, BIOS, mac))
	l, err := f.srv.Listen(ListenOptions{TFTPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()

	var buf bytes.Buffer
	if _, err := tftp.Get(ctx, l.TFTPAddr().String(), "undionly.kpxe", tftp.ClientOptions{BlockSize: 1468}, &buf); err != nil {
		t.Fatalf("TFTP undionly.kpxe: %v", err)
	}
	if buf.String() != "undionly.kpxe\n" {
		t.Fatalf("TFTP undionly.kpxe = %q, want the fixture's binary", buf.String())
	}
	resp, err := http.Get("http://" + l.HTTPAddr().String() + ScriptPath(mac))
	if err != nil {
		t.Fatalf("GET script: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte("#!ipxe")) {
		t.Fatalf("GET script: %d %q", resp.StatusCode, body)
	}

	// The server records a transfer when the client's last ACK reaches
	// it, which may come after the client has returned: wait for both
	// records before stopping the server.
	want := []stage.Stage{stage.Prepared, stage.TFTPSent, stage.Script}
	deadline := time.Now().Add(10 * time.Second)
	for !sameStages(f.rec.Records(), want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.rec.Records(); !sameStages(got, want) {
		t.Fatalf("stages = %s, want %v in any order after the first", stages(got), want)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get("http://" + l.HTTPAddr().String() + ScriptPath(mac)); err == nil {
		t.Fatal("the HTTP listener still answers after Serve returned")
	}
}

// sameStages reports whether recs are want's stages, the first in place
// and the rest in any order (TFTP and HTTP record concurrently).
func sameStages(recs []stage.Record, want []stage.Stage) bool {
	if len(recs) != len(want) || recs[0].Stage != want[0] {
		return false
	}
	got := make([]string, 0, len(recs)-1)
	for _, r := range recs[1:] {
		got = append(got, string(r.Stage))
	}
	exp := make([]string, 0, len(want)-1)
	for _, w := range want[1:] {
		exp = append(exp, string(w))
	}
	slices.Sort(got)
	slices.Sort(exp)
	return slices.Equal(got, exp)
}

func TestListenRefusesWhatItWouldOverride(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name  string
		o     ListenOptions
		field string
	}{
		{"decider set", ListenOptions{DHCP: &dhcp.Options{Interface: "lo", Decider: dhcp.DeciderFunc(func(context.Context, dhcp.Client) dhcp.Decision { return dhcp.Decision{} })}}, "DHCP"},
		{"mode disagrees", ListenOptions{DHCP: &dhcp.Options{Interface: "lo", Mode: dhcp.Proxy}}, "DHCP.Mode"},
		{"no interface", ListenOptions{DHCP: &dhcp.Options{Mode: dhcp.Authoritative}}, "DHCP.Interface"},
		{"tftp handler set", ListenOptions{TFTPAddr: "127.0.0.1:0", TFTP: &tftp.Server{OnTransfer: func(tftp.Transfer) {}}}, "TFTP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.srv.Listen(tc.o)
			var le *ListenOptionsError
			if !errors.As(err, &le) || le.Field != tc.field {
				t.Fatalf("Listen = %v, want a ListenOptionsError on %s", err, tc.field)
			}
		})
	}
	if _, err := f.srv.Listen(ListenOptions{TFTPAddr: "127.0.0.1:notaport"}); err == nil {
		t.Fatal("Listen on a bad TFTP address succeeded")
	}
}

// TestRunOverIPv6Loopback serves TFTP and HTTP on [::1]: a script
// fetched over IPv6 names HTTPBase6's URLs, a loader fetched by the
// DHCPv6 path boot/<mac>/snponly.efi is recorded against its MAC and
// node without an address book, in blocks that fit IPv6 (1448).
func TestRunOverIPv6Loopback(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.HTTPBase6 = "http://[fd00:a6::1]:8080" })
	mac := "52:54:00:aa:bb:06"
	cfg := f.ramdiskConfig("node-6", IPXE, UEFI, mac)
	// The conductor's ipa-api-url with an IPv6 literal passes the
	// kernel parameter checks and reaches the script as written.
	cfg.Params = []string{"ipa-api-url=http://[fd00:a6::1]:6385", "console=ttyS0,115200n8"}
	f.put(t, cfg)
	l, err := f.srv.Listen(ListenOptions{TFTPAddr: "[::1]:0", HTTPAddr: "[::1]:0"})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	resp, err := http.Get("http://" + l.HTTPAddr().String() + ScriptPath(mac))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("http://[fd00:a6::1]:8080/boot/52-54-00-aa-bb-06/kernel")) ||
		!bytes.Contains(body, []byte(" ipa-api-url=http://[fd00:a6::1]:6385 ")) {
		t.Errorf("script over IPv6 does not use HTTPBase6:\n%s", body)
	}
	var buf bytes.Buffer
	res, err := tftp.Get(ctx, l.TFTPAddr().String(), "boot/52-54-00-aa-bb-06/snponly.efi", tftp.ClientOptions{BlockSize: 1468}, &buf)
	if err != nil {
		t.Fatalf("TFTP: %v", err)
	}
	if res.BlockSize != 1448 || buf.String() != "snponly.efi\n" {
		t.Errorf("TFTP block size %d, body %q", res.BlockSize, buf.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var tf *stage.Record
		for _, r := range f.rec.Records() {
			if r.Stage == stage.TFTPSent {
				tf = &r
			}
		}
		if tf != nil {
			if tf.MAC != mac || tf.Node != "node-6" || tf.Addr != "::1" {
				t.Errorf("TFTP record %+v: want MAC %s, node node-6, from ::1", *tf, mac)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TFTP record: %v", f.rec.Records())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
