// Package dhcp6 is the boot server's DHCPv6 server (RFC 8415), on
// github.com/insomniacslk/dhcp's dhcpv6: stateful for an isolated IPv6
// provisioning network (addresses from a pool, IA_NA), or a proxy beside
// an existing DHCPv6 server (boot options only). It classifies each
// client (firmware architecture from option 61, PXE and UEFI HTTP boot
// from the vendor class, option 16; iPXE from the user class, option 15),
// finds its MAC, and asks a Decider what it boots: the boot file URL
// (option 59, RFC 5970), tftp://[addr]/path or http(s).
//
// # Usage
//
//	srv, err := dhcp6.New(dhcp6.Options{
//		Mode:       dhcp6.Stateful,
//		Interface:  "prov0",
//		ServerAddr: netip.MustParseAddr("fd00:a6::1"),
//		Prefix:     netip.MustParsePrefix("fd00:a6::/64"),
//		PoolStart:  netip.MustParseAddr("fd00:a6::100"),
//		PoolEnd:    netip.MustParseAddr("fd00:a6::1ff"),
//		Decider:    decider,  // what each MAC boots (netboot.Server)
//		Observer:   observer, // DHCP stage records
//	})
//	...
//	err = srv.Serve(ctx)
//
// Clients configure statefully when the link's router advertisements
// set the managed flag (package netboot/ra sends them). Reply is the
// protocol without I/O: a client message and how it arrived (Source) in,
// the answer (or nil) out. Relays are handled around it: Unwrap takes
// the client's message out of a Relay-Forward chain, Wrap puts the
// answer into the matching Relay-Reply chain. Serve and ServeConn do
// that for every packet; tests, fuzzing and benchmarks call the three
// directly. Listen is the one place the sockets are opened.
//
// # Which client is it
//
// Leases and boot decisions are per machine, by MAC: a machine keeps its
// address as its firmware, then iPXE, then the ramdisk ask, each with a
// DUID of its own. ClientMAC finds the MAC in tinkerbell smee's order:
// the relay's Client Link-Layer Address option (79), the relay's view of
// the client's link-local address (EUI-64), a link-layer DUID (DUID-LL,
// DUID-LLT), and for a direct client its link-local source address
// (EUI-64). A DUID seen once with a MAC is remembered (bounded), so that
// the same client behind a relay that adds no option 79, or with a
// stable-privacy link-local address, is still known; Learn adds one the
// embedder knows. A request whose MAC cannot be found is not answered,
// and counted (anvil_dhcp6_ignored_total{reason="no_mac"}): nothing is
// guessed.
//
// # Stateful mode
//
// Solicit gets an Advertise (a Reply with rapid commit) offering the
// client's reservation (Decision.Address), else the address it had,
// else the one its IA_NA asks for when free, else a free pool address,
// kept for it for Options.OfferHold; Request gets a Reply leasing it;
// Renew and Rebind new lifetimes for an address the client holds, or for
// a free pool address the server has no record of (it restarted: the
// lease table is in memory), zero lifetimes for one off the link, and
// NoBinding for any other; Confirm says whether the addresses are on
// link; Release and Decline free or block the address;
// Information-request gets the options without an address. A full pool
// answers NoAddrsAvail in the IA. Answers carry the DNS servers and the
// boot options when the client's Option Request Option asks for them.
// Messages are checked for the server identifier as RFC 8415 section 16
// says, and one that names another server is not answered.
//
// # Proxy mode
//
// See replyProxy in proxy.go: network boot clients that the Decider
// gives a boot file get an Advertise (to a Solicit) or a Reply (to a
// Request naming this server, or an Information-request) with the boot
// options and no IA. UEFI PXE and HTTP boot take their address from the
// link's server and the boot file from this one.
//
// # Boot options
//
// The boot file URL (59) and its parameters (60) are sent only when the
// client asks for them. A UEFI HTTP boot client also gets vendor class
// "HTTPClient" (enterprise 343) back: EDK2 takes the URL only with it.
// Every answer fits IPv6's minimum MTU (1232 bytes of DHCPv6), or it is
// not sent and Reply returns a DecisionError.
//
// # Stages and metrics
//
// A Solicit is a stage.DHCPDiscover record, an Advertise a
// stage.DHCPOffer, a Reply leasing an address (or giving a boot file) a
// stage.DHCPAck, each with a note that says DHCPv6. Metrics returns the
// server's Prometheus collector, registered nowhere by the package.
package dhcp6
