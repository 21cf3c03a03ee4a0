package dhcp6

import (
	"context"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// replyProxy answers in Proxy mode, beside the DHCPv6 server that hands
// out the link's addresses: only network boot clients (a PXE or HTTP
// boot vendor class, or iPXE) that the Decider gives a boot file URL,
// and with boot options only, never an IA:
//
//   - a Solicit gets an Advertise without IA options: UEFI PXE and HTTP
//     boot (EDK2) keep such an advertise as the boot file's offer and
//     take the address from the other server's;
//   - a Request naming this server (EDK2 asks the proxy it chose, on
//     ServerPort or PXEPort) gets a Reply with the same options;
//   - an Information-request (a stateless client, under router
//     advertisements with the other-configuration flag) gets a Reply
//     with the boot options.
//
// iPXE configured statefully (the managed flag) takes only an Advertise
// with an address: beside another server it gets its boot file only
// when that one sends it, so a provisioning network of iPXE machines
// uses Stateful mode.
func (s *Server) replyProxy(ctx context.Context, req *dhcpv6.Message, c Client) (*dhcpv6.Message, error) {
	mt := req.MessageType
	if !c.PXEClient && !c.HTTPClient && !c.IPXE {
		return s.ignore(ignoreNotPXE, c, mt)
	}
	var answer dhcpv6.MessageType
	switch mt {
	case dhcpv6.MessageTypeSolicit:
		if req.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
			// A client that commits to the first answer must get its
			// address from the real server.
			return s.ignore(ignoreType, c, mt)
		}
		answer = dhcpv6.MessageTypeAdvertise
	case dhcpv6.MessageTypeRequest:
		answer = dhcpv6.MessageTypeReply
	case dhcpv6.MessageTypeInformationRequest:
		return s.inform(ctx, req, c)
	default:
		return s.ignore(ignoreType, c, mt)
	}
	d, err := s.decide(ctx, c)
	if mt == dhcpv6.MessageTypeSolicit {
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPDiscover, Arch: string(c.Arch),
			Note: "DHCPv6 solicit from " + who(c)})
	}
	if err != nil {
		return nil, err
	}
	f := bootFile(c, d)
	if d.Ignore || f == "" {
		return s.ignore(ignoreDecider, c, mt)
	}
	rep := s.answer(req, answer)
	s.configure(rep, req, c, d)
	rec := stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPOffer, Arch: string(c.Arch), File: f,
		Note: "proxy DHCPv6 advertised boot file " + f}
	if answer == dhcpv6.MessageTypeReply {
		rec.Stage, rec.Note = stage.DHCPAck, "proxy DHCPv6 replied with boot file "+f
	}
	s.record(rec)
	return rep, nil
}
