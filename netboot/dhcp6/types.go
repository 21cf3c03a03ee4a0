package dhcp6

import (
	"context"
	"net/netip"

	"github.com/anvilmetal/anvil/netboot/dhcp"
)

// Mode is how the server answers.
type Mode string

// Modes.
const (
	// Stateful hands out addresses from a pool (IA_NA, RFC 8415) and the
	// boot options: for an isolated provisioning network whose router
	// advertisements set the managed flag.
	Stateful Mode = "stateful"
	// Proxy answers network boot clients with boot options only, no
	// addresses, next to a DHCPv6 server that hands out addresses (see
	// proxy.go for what each firmware makes of it).
	Proxy Mode = "proxy"
)

// MACSource says how the server found a client's MAC, in the order it
// looks (ClientMAC).
type MACSource string

// Where a MAC comes from.
const (
	// MACFromRelayOption is a relay agent's Client Link-Layer Address
	// option (79, RFC 6939), of the relay nearest the client.
	MACFromRelayOption MACSource = "relay-option-79"
	// MACFromRelayPeer is the EUI-64 interface identifier of the
	// client's link-local address as the nearest relay saw it.
	MACFromRelayPeer MACSource = "relay-peer-eui64"
	// MACFromDUID is a link-layer DUID (DUID-LL or DUID-LLT) with an
	// Ethernet address.
	MACFromDUID MACSource = "duid"
	// MACFromLinkLocal is the EUI-64 interface identifier of a direct
	// client's link-local source address.
	MACFromLinkLocal MACSource = "link-local-eui64"
	// MACFromLearned is a DUID the server saw earlier with a MAC (any of
	// the above), or that Server.Learn was told.
	MACFromLearned MACSource = "learned"
)

// Client is what the server learned about a client from its request.
type Client struct {
	// MAC is the client's Ethernet address, lower case, colon separated.
	MAC     string
	MACFrom MACSource
	// DUID is the client's DUID (option 1), in hexadecimal.
	DUID string
	// Arch is the firmware, from option 61 (RFC 5970), else from a PXE
	// or HTTP boot vendor class (option 16).
	Arch dhcp.Arch
	// IPXE is true for iPXE (user class "iPXE"): send it the script URL.
	IPXE bool
	// HTTPClient is true for UEFI HTTP boot (vendor class data
	// "HTTPClient..."): the boot file is an http URL.
	HTTPClient bool
	// PXEClient is true for a PXE firmware (vendor class data
	// "PXEClient...").
	PXEClient bool
	// VendorClass is the first vendor class data (option 16), and
	// UserClass the user classes (option 15).
	VendorClass string
	UserClass   []string
	// WantsBootFileURL is true when the client's Option Request Option
	// asks for the boot file URL (59): only then is one sent.
	WantsBootFileURL bool
	// Relayed is true for a request that came through relay agents; Link
	// is then the nearest relay's link-address (zero when it left it
	// unspecified).
	Relayed bool
	Link    netip.Addr
}

// Decision is what to tell a client.
type Decision struct {
	// Ignore sends no answer (proxy mode: a machine that is not ours).
	Ignore bool
	// Node is the node the client belongs to, for stage records; empty
	// for a machine the boot server has no configuration for.
	Node string
	// BootFileURL is option 59: a tftp://[addr]/path or http(s) URL;
	// empty sends no boot file.
	BootFileURL string
	// BootFileParams is option 60, sent with BootFileURL when the client
	// asks for it.
	BootFileParams []string
	// Address is the client's reserved address (stateful mode); the zero
	// Addr means one from the pool.
	Address netip.Addr
}

// Decider decides what a client boots. It must answer quickly (it runs on
// the packet path) and be safe for concurrent use.
type Decider interface {
	DecideBoot6(ctx context.Context, c Client) Decision
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(ctx context.Context, c Client) Decision

// DecideBoot6 calls f(ctx, c).
func (f DeciderFunc) DecideBoot6(ctx context.Context, c Client) Decision { return f(ctx, c) }
