package netboot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
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
	var got []stage.Stage
	for _, r := range f.rec.all() {
		got = append(got, r.Stage)
	}
	want := []stage.Stage{stage.Prepared, stage.File, stage.Script}
	if len(got) != len(want) || got[0] != want[0] || got[2] != want[2] {
		t.Fatalf("stages = %v, want %v", got, want)
	}
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
