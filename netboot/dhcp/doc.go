// Package dhcp is the boot server's DHCPv4 server, on
// github.com/insomniacslk/dhcp: authoritative for an isolated provisioning
// network (an address pool and reservations), or proxyDHCP beside an
// existing server (PXE options only). It classifies each client (firmware
// architecture from option 93, iPXE from option 175 or user class "iPXE",
// UEFI HTTP boot from vendor class "HTTPClient") and asks a Decider what
// to boot. An authoritative answer to iPXE that carries a boot file also
// carries iPXE's no-pxedhcp setting (option 175, sub-option 176), so
// iPXE requests its address at once instead of listening two more
// seconds for ProxyDHCP offers.
//
// # Usage
//
// Build a Server with New, giving it the mode, the interface and the
// server's address on it, the pool (authoritative mode) and a Decider;
// then run Serve until its context ends:
//
//	srv, err := dhcp.New(dhcp.Options{
//		Mode:      dhcp.Authoritative,
//		Interface: "prov0",
//		ServerIP:  netip.MustParseAddr("192.0.2.1"),
//		Subnet:    netip.MustParsePrefix("192.0.2.0/24"),
//		PoolStart: netip.MustParseAddr("192.0.2.100"),
//		PoolEnd:   netip.MustParseAddr("192.0.2.199"),
//		Decider:   decider,  // what each MAC boots
//		Observer:  observer, // DHCP stage records, for "where did the boot stop"
//	})
//	...
//	err = srv.Serve(ctx)
//
// Reply is the whole protocol without I/O: a request in, the answer (or
// nil) out. Serve and ServeConn call it for every packet; tests, fuzzing
// and benchmarks call it directly.
//
// # Authoritative mode
//
// DISCOVER gets an OFFER of the client's reservation (Decision.Address),
// else the address it had, else the one it asks for when free, else a
// free pool address; the offered address is kept for the client for
// Options.OfferHold. REQUEST gets an ACK for the offered or leased
// address, and a NAK for an address of another network, another client's
// or one not offered (RFC 2131 section 4.3.2); a REQUEST for a free pool
// address the server has no record of is granted, so that clients keep
// their addresses across a restart of the server (the lease table is in
// memory). DECLINE takes the address out of the pool for
// Options.DeclineHold; RELEASE ends the lease (the client still gets the
// same address back next time); INFORM gets the options without an
// address. Answers carry the subnet mask, router, DNS servers, lease
// times, server identifier, host name and the boot options.
//
// # Proxy mode
//
// Only PXE and HTTP boot clients (vendor class "PXEClient" or
// "HTTPClient") that the Decider does not ignore and gives a boot file
// get an answer: an OFFER without an address (yiaddr 0.0.0.0), with
// option 60 "PXEClient" (or "HTTPClient"), the server identifier, the boot
// file in the file field and option 67, siaddr, and, for PXE, option 43
// with discovery control bit 3 so that the firmware downloads that boot
// file instead of looking for boot servers. The ProxyDHCPREQUEST PXE
// firmware then sends to port 4011 (and a REQUEST naming this server on
// port 67) gets the same options in an ACK.
//
// # Boot options
//
// The boot file goes in the file field (when it fits its 127 bytes) and
// in option 67; siaddr is Decision.NextServer or Options.ServerIP. HTTP
// boot clients get option 60 "HTTPClient" back, and their boot file must
// be a URL.
//
// # Stages and metrics
//
// Every DISCOVER, OFFER and ACK is a stage.Record (DHCPDiscover with the
// MAC and architecture, DHCPOffer with the address and boot file,
// DHCPAck) sent to the Observer. Metrics returns the server's Prometheus
// collector, registered nowhere by the package.
package dhcp
