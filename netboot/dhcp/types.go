package dhcp

import (
	"context"
	"net/netip"
)

// Arch is a client's firmware, from DHCP option 93 (RFC 4578 and IANA's
// processor architecture types).
type Arch string

// Architectures the boot server tells apart.
const (
	ArchUnknown      Arch = ""
	ArchBIOS         Arch = "bios"            // 0: x86 BIOS
	ArchEFIIA32      Arch = "efi-ia32"        // 6
	ArchEFIx64       Arch = "efi-x86_64"      // 7 (EFI BC) and 9
	ArchEFIARM32     Arch = "efi-arm32"       // 10
	ArchEFIARM64     Arch = "efi-arm64"       // 11
	ArchEFIx64HTTP   Arch = "efi-x86_64-http" // 16
	ArchEFIIA32HTTP  Arch = "efi-ia32-http"   // 15
	ArchEFIARM64HTTP Arch = "efi-arm64-http"  // 19
)

// UEFI reports whether a is a UEFI firmware.
func (a Arch) UEFI() bool { return a != ArchUnknown && a != ArchBIOS }

// Mode is how the server answers.
type Mode string

// Modes.
const (
	// Authoritative hands out addresses from a pool (and reservations)
	// and the boot options: for an isolated provisioning network.
	Authoritative Mode = "authoritative"
	// Proxy answers PXE clients with boot options only (no address), on
	// port 67 and 4011, next to a DHCP server that hands out addresses.
	Proxy Mode = "proxy"
)

// Client is what the server learned about a client from its request.
type Client struct {
	// MAC is the client hardware address, lower case, colon separated.
	MAC  string
	Arch Arch
	// IPXE is true for iPXE (option 175, or user class "iPXE"): send it
	// the script URL, not iPXE again.
	IPXE bool
	// HTTPClient is true for UEFI HTTP boot (vendor class "HTTPClient"):
	// the boot file is a URL.
	HTTPClient bool
	// PXEClient is true for a PXE firmware (vendor class "PXEClient").
	PXEClient   bool
	VendorClass string
	UserClass   []string
	Hostname    string
	// Relay is the relay agent's address (giaddr), or the zero Addr.
	Relay netip.Addr
}

// Decision is what to tell a client.
type Decision struct {
	// Ignore sends no answer (proxy mode: a machine that is not ours).
	Ignore bool
	// Node is the node the client belongs to, for stage records; empty
	// for a machine the boot server has no configuration for.
	Node string
	// BootFile is the boot file name (TFTP) or URL (HTTP boot, iPXE);
	// empty sends no boot file (the firmware moves on to its next boot
	// device).
	BootFile string
	// NextServer is the TFTP server (siaddr); the zero Addr means the
	// server's own address.
	NextServer netip.Addr
	// Address is the client's reserved address (authoritative mode); the
	// zero Addr means one from the pool.
	Address  netip.Addr
	Hostname string
}

// Decider decides what a client boots. It must answer quickly (it runs on
// the packet path) and be safe for concurrent use.
type Decider interface {
	DecideBoot(ctx context.Context, c Client) Decision
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(ctx context.Context, c Client) Decision

// DecideBoot calls f(ctx, c).
func (f DeciderFunc) DecideBoot(ctx context.Context, c Client) Decision { return f(ctx, c) }
