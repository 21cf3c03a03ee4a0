package dhcp

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestReplyGolden runs each message type in each mode for each kind of
// client, and compares the answer (or its absence) with
// testdata/reply/<name>.golden.
func TestReplyGolden(t *testing.T) {
	relay := func(d *dhcpv4.DHCPv4) {
		d.GatewayIPAddr = net.ParseIP("192.0.2.254").To4()
		d.UpdateOption(dhcpv4.OptRelayAgentInfo(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(1), []byte("port7"))))
	}
	cases := []struct {
		name string
		mode Mode
		pxe  bool // the request came to the PXE port
		// prep is sent first, answers discarded.
		prep []func(t *testing.T) *dhcpv4.DHCPv4
		req  func(t *testing.T) *dhcpv4.DHCPv4
	}{
		{name: "auth-discover-bios", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()) }},
		{name: "auth-discover-efi", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeEFI()) }},
		{name: "auth-discover-ipxe", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, ipxeClient()) }},
		{name: "auth-discover-http", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, httpClient()) }},
		{name: "auth-discover-no-boot-file", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macNoBoot) }},
		{name: "auth-discover-reserved", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macReserve, pxeBIOS()) }},
		{name: "auth-discover-relayed", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeEFI(), relay) }},
		{name: "auth-discover-ignored", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macIgnored, pxeBIOS()) }},
		{name: "auth-request-selecting", mode: Authoritative,
			prep: []func(t *testing.T) *dhcpv4.DHCPv4{
				func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()) }},
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), serverID("192.0.2.1"), requested("192.0.2.100"))
			}},
		{name: "auth-request-not-offered", mode: Authoritative,
			prep: []func(t *testing.T) *dhcpv4.DHCPv4{
				func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()) }},
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), serverID("192.0.2.1"), requested("192.0.2.101"))
			}},
		{name: "auth-request-other-server", mode: Authoritative,
			prep: []func(t *testing.T) *dhcpv4.DHCPv4{
				func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()) }},
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), serverID("192.0.2.9"), requested("192.0.2.100"))
			}},
		{name: "auth-request-init-reboot-other-network", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, requested("198.51.100.7"))
			}},
		{name: "auth-request-init-reboot-unknown-free", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeEFI(), requested("192.0.2.102"))
			}},
		{name: "auth-request-renewing", mode: Authoritative,
			prep: []func(t *testing.T) *dhcpv4.DHCPv4{
				func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA) },
				func(t *testing.T) *dhcpv4.DHCPv4 {
					return msg(t, dhcpv4.MessageTypeRequest, macA, serverID("192.0.2.1"), requested("192.0.2.100"))
				}},
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, dhcpv4.WithClientIP(net.ParseIP("192.0.2.100")))
			}},
		{name: "auth-inform", mode: Authoritative,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeInform, macA, pxeEFI(), dhcpv4.WithClientIP(net.ParseIP("192.0.2.77")))
			}},
		{name: "proxy-discover-bios", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()) }},
		{name: "proxy-discover-efi", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, pxeEFI()) }},
		{name: "proxy-discover-ipxe", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, ipxeClient()) }},
		{name: "proxy-discover-http", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA, httpClient()) }},
		{name: "proxy-discover-not-pxe", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macA) }},
		{name: "proxy-discover-ignored", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macIgnored, pxeBIOS()) }},
		{name: "proxy-discover-no-boot-file", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 { return msg(t, dhcpv4.MessageTypeDiscover, macNoBoot, pxeBIOS()) }},
		{name: "proxy-request-pxe-port", mode: Proxy, pxe: true,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeEFI(), dhcpv4.WithClientIP(net.ParseIP("192.0.2.160")))
			}},
		{name: "proxy-request-port-67-names-us", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), serverID("192.0.2.1"))
			}},
		{name: "proxy-request-port-67-for-real-server", mode: Proxy,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), requested("192.0.2.160"))
			}},
		{name: "proxy-request-other-server", mode: Proxy, pxe: true,
			req: func(t *testing.T) *dhcpv4.DHCPv4 {
				return msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), serverID("192.0.2.9"))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newTestServer(t, tc.mode)
			ctx := context.Background()
			for _, p := range tc.prep {
				if _, err := s.Reply(ctx, p(t)); err != nil {
					t.Fatalf("prep: %v", err)
				}
			}
			if tc.pxe {
				ctx = OnPXEPort(ctx)
			}
			rep, err := s.Reply(ctx, tc.req(t))
			if err != nil {
				t.Fatalf("Reply: %v", err)
			}
			golden(t, filepath.Join("testdata", "reply", tc.name+".golden"), render(rep))
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to rewrite it)\n--- got\n%s--- want\n%s", path, got, want)
	}
}
