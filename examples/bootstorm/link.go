package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// link is the simulated machines' shared view of the wire for DHCP: one
// AF_PACKET socket on the client side of the veth. Firmware sends its
// DHCP messages from 0.0.0.0 with its own MAC as the Ethernet source,
// before it has an address, so each machine's DISCOVER and REQUEST are
// written as whole frames; answers (broadcast, as the machines set the
// broadcast flag) are handed to the machine whose transaction ID they
// carry.
type link struct {
	fd      int
	ifindex int

	mu      sync.Mutex
	waiters map[uint32]chan *dhcpv4.DHCPv4
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// dhcpFilter passes IPv4 UDP datagrams to port 68 that are not fragments:
// the kernel copies nothing else (the TFTP and HTTP traffic of the same
// interface) to the socket.
func dhcpFilter() ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(dhcpProgram())
	if err != nil {
		return nil, err
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// dhcpProgram is dhcpFilter's program: every jump that fails lands on
// the last instruction, which drops.
func dhcpProgram() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.ETH_P_IP, SkipTrue: 8},
		bpf.LoadAbsolute{Off: 23, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_UDP, SkipTrue: 6},
		bpf.LoadAbsolute{Off: 20, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 4},
		bpf.LoadMemShift{Off: 14},
		bpf.LoadIndirect{Off: 16, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 68, SkipTrue: 1},
		bpf.RetConstant{Val: 65535},
		bpf.RetConstant{Val: 0},
	}
}

func openLink(ifname string) (*link, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	filter, err := dhcpFilter()
	if err == nil {
		err = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
			&unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]})
	}
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	}
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	}
	if err == nil {
		// The reader wakes up at least this often to see its context end.
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("packet socket on %s: %w", ifname, err)
	}
	return &link{fd: fd, ifindex: ifi.Index, waiters: make(map[uint32]chan *dhcpv4.DHCPv4)}, nil
}

// drops is how many DHCP answers the packet socket dropped for want of
// buffer (PACKET_STATISTICS); it resets the count.
func (l *link) drops() int {
	st, err := unix.GetsockoptTpacketStats(l.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return -1
	}
	return int(st.Drops)
}

// run hands every DHCP answer to its waiter until ctx ends; it closes the
// socket when it returns.
func (l *link) run(ctx context.Context) {
	defer unix.Close(l.fd)
	buf := make([]byte, 65536)
	for ctx.Err() == nil {
		n, from, err := unix.Recvfrom(l.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		payload, ok := udpPayload(buf[:n])
		if !ok {
			continue
		}
		msg, err := dhcpv4.FromBytes(payload)
		if err != nil || msg.OpCode != dhcpv4.OpcodeBootReply {
			continue
		}
		l.mu.Lock()
		ch := l.waiters[binary.BigEndian.Uint32(msg.TransactionID[:])]
		l.mu.Unlock()
		if ch != nil {
			select {
			case ch <- msg:
			default:
			}
		}
	}
}

// udpPayload returns the UDP payload of an Ethernet frame the filter let
// through.
func udpPayload(f []byte) ([]byte, bool) {
	if len(f) < 14+20+8 {
		return nil, false
	}
	ihl := int(f[14]&0x0f) * 4
	if len(f) < 14+ihl+8 {
		return nil, false
	}
	udp := f[14+ihl:]
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < 8 || ulen > len(udp) {
		return nil, false
	}
	return udp[8:ulen], true
}

// subscribe registers a waiter for transaction xid.
func (l *link) subscribe(xid uint32) chan *dhcpv4.DHCPv4 {
	ch := make(chan *dhcpv4.DHCPv4, 8)
	l.mu.Lock()
	l.waiters[xid] = ch
	l.mu.Unlock()
	return ch
}

func (l *link) unsubscribe(xid uint32) {
	l.mu.Lock()
	delete(l.waiters, xid)
	l.mu.Unlock()
}

// send broadcasts msg from 0.0.0.0:68 to 255.255.255.255:67 in a frame
// from the machine's MAC.
func (l *link) send(src net.HardwareAddr, msg *dhcpv4.DHCPv4) error {
	payload := msg.ToBytes()
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	copy(ip[16:20], net.IPv4bcast.To4())
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 68)
	binary.BigEndian.PutUint16(udp[2:], 67)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(f[42:], payload)
	to := &unix.SockaddrLinklayer{Ifindex: l.ifindex, Halen: 6, Protocol: htons(unix.ETH_P_IP)}
	copy(to.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	for {
		err := unix.Sendto(l.fd, f, 0, to)
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
			time.Sleep(time.Millisecond)
			continue
		}
		return err
	}
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
