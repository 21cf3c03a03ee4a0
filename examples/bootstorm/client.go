package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/internal/procstat"
	"github.com/anvilmetal/anvil/netboot/tftp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// dhcpTimeouts are the PXE specification's DHCP retransmission timeouts
// (4, 8, 16 and 32 s): a message unanswered after the last is a failed
// boot.
var dhcpTimeouts = []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}

// Firmware's TFTP: EDK2's PXE base code waits 4 s for a packet and sends
// its last one 6 times.
const (
	tftpTimeout = 4 * time.Second
	tftpRetries = 6
	// attempts is how many times a machine tries a failed TFTP or HTTP
	// step (a PXE ROM retries its boot; Anvil's iPXE script retries its
	// fetches) before it counts as failed.
	attempts = 3
	// httpTimeout bounds one HTTP fetch (iPXE's own timeout is per
	// packet; this is a backstop).
	httpTimeout = 5 * time.Minute
)

// clientResult is what one simulated machine measured.
type clientResult struct {
	DoneSec   float64 `json:"done_s"` // since the storm started; 0 if failed
	Failed    string  `json:"failed,omitempty"`
	DHCPLost  int     `json:"dhcp_lost"`
	Retries   int     `json:"retries"`
	TFTPBytes int64   `json:"tftp_bytes"`
	HTTPBytes int64   `json:"http_bytes"`
}

// stormResult is what the clients process prints.
type stormResult struct {
	Clients      int            `json:"clients"`
	Done         int            `json:"done"`
	Failed       int            `json:"failed"`
	Failures     map[string]int `json:"failures,omitempty"`
	AllDoneSec   float64        `json:"time_until_all_ramdisks_s"`
	P50Sec       float64        `json:"p50_s"`
	P99Sec       float64        `json:"p99_s"`
	DHCPLost     int            `json:"dhcp_answers_lost"`
	Retries      int            `json:"retries"`
	TFTPBytes    int64          `json:"tftp_bytes"`
	HTTPBytes    int64          `json:"http_bytes"`
	BytesPerSec  float64        `json:"bytes_per_s"`
	ClientCPUSec float64        `json:"client_cpu_s"`
	// PacketDrops is how many DHCP answers the machines' packet socket
	// dropped (its buffer full): answers lost on the machines' side.
	PacketDrops int `json:"client_packet_socket_drops"`
}

// machine is one simulated machine: BIOS machines run a PXE ROM that
// loads undionly.kpxe, UEFI ones a UEFI PXE client that loads
// snponly.efi; both then run iPXE, which asks DHCP again and fetches its
// script, kernel and ramdisk over HTTP.
type machine struct {
	idx     int
	mac     net.HardwareAddr
	uefi    bool
	link    *link
	iface   string
	kernel  int64
	ramdisk int64
	start   time.Time
	res     clientResult
	addr    netip.Addr
	http    *http.Client
	// serverNS is the server's namespace and lladdr the MAC of the
	// machines' interface, for the server's neighbour entries.
	serverNS string
	lladdr   string
}

func macFor(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0x5e, byte(i >> 16), byte(i >> 8), byte(i)}
}

func hyphenMAC(m net.HardwareAddr) string { return strings.ReplaceAll(m.String(), ":", "-") }

// failure marks the machine failed with a short reason (the reasons are
// counted, so they carry no per-machine detail).
type failure string

func (f failure) Error() string { return string(f) }

func (m *machine) boot(ctx context.Context) {
	err := m.run(ctx)
	if err != nil {
		var f failure
		if errors.As(err, &f) {
			m.res.Failed = string(f)
		} else {
			m.res.Failed = err.Error()
		}
		return
	}
	m.res.DoneSec = time.Since(m.start).Seconds()
}

func (m *machine) run(ctx context.Context) error {
	// The firmware's PXE client: DHCP, then the network boot program
	// over TFTP from the next server.
	ack, err := m.dora(ctx, false)
	if err != nil {
		return err
	}
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || ip.IsUnspecified() {
		return failure("dhcp: ACK without an address")
	}
	m.addr = ip
	if out, err := exec.CommandContext(ctx, "ip", "addr", "add", ip.String()+"/32", "dev", m.iface).CombinedOutput(); err != nil &&
		!bytes.Contains(out, []byte("File exists")) {
		return fmt.Errorf("ip addr add %s: %v: %s", ip, err, out)
	}
	// The server's neighbour entry for the address, as it would learn
	// it by ARP: permanent, because Linux bounds the learned entries of
	// all namespaces together by the host's gc_thresh3 (1024 by default,
	// not settable inside a namespace), which a thousand machines
	// behind one interface overflow.
	if m.serverNS != "" {
		if out, err := exec.CommandContext(ctx, "ip", "-n", m.serverNS, "neigh", "replace", ip.String(), "lladdr", m.lladdr,
			"dev", serverIf, "nud", "permanent").CombinedOutput(); err != nil {
			return fmt.Errorf("ip neigh replace %s: %v: %s", ip, err, out)
		}
	}
	nbp := bootFile(ack)
	next, ok := netip.AddrFromSlice(ack.ServerIPAddr.To4())
	if nbp == "" || !ok || next.IsUnspecified() {
		return failure("dhcp: PXE answer without a boot file and next server")
	}
	if err := m.retry(ctx, func() error {
		var w countWriter
		_, err := tftp.Get(ctx, netip.AddrPortFrom(next, 69).String(), nbp, tftp.ClientOptions{
			BlockSize: 1468, TSize: true, Timeout: tftpTimeout, Retries: tftpRetries, LocalAddr: ip,
		}, &w)
		m.res.TFTPBytes += w.n
		if err != nil {
			var re *tftp.RemoteError
			if errors.As(err, &re) {
				return failure("tftp: server error: " + re.Message)
			}
			return failure("tftp: " + classify(err))
		}
		return nil
	}); err != nil {
		return err
	}

	// iPXE: DHCP again, announcing itself, then its script over HTTP.
	ack, err = m.dora(ctx, true)
	if err != nil {
		return err
	}
	script := bootFile(ack)
	if !strings.HasPrefix(script, "http://") {
		return failure("dhcp: iPXE answer without an http boot file")
	}
	kernel, initrd, err := m.script(ctx, script, 0)
	if err != nil {
		return err
	}
	if kernel == "" || initrd == "" {
		return failure("ipxe: script names no kernel or initrd")
	}
	if err := m.retry(ctx, func() error { return m.fetch(ctx, kernel, m.kernel) }); err != nil {
		return err
	}
	return m.retry(ctx, func() error { return m.fetch(ctx, initrd, m.ramdisk) })
}

// retry runs step up to attempts times, a second apart.
func (m *machine) retry(ctx context.Context, step func() error) error {
	var err error
	for i := range attempts {
		if i > 0 {
			m.res.Retries++
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		if err = step(); err == nil {
			return nil
		}
	}
	return err
}

// classify shortens an error to what kind it is, so that failures are
// counted by kind.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func bootFile(ack *dhcpv4.DHCPv4) string {
	if f := ack.Options.Get(dhcpv4.OptionBootfileName); len(f) > 0 {
		return strings.TrimRight(string(f), "\x00")
	}
	return ack.BootFileName
}

// dora runs DISCOVER, OFFER, REQUEST, ACK with the PXE specification's
// retransmissions; every retransmission counts an answer lost.
func (m *machine) dora(ctx context.Context, ipxe bool) (*dhcpv4.DHCPv4, error) {
	arch, archStr := iana.INTEL_X86PC, "00000"
	if m.uefi {
		arch, archStr = iana.EFI_X86_64, "00007"
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithHwAddr(m.mac),
		dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:" + archStr + ":UNDI:002001")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 2, 1})),
		dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionBootfileName,
			dhcpv4.OptionTFTPServerName, dhcpv4.OptionClassIdentifier),
	}
	if ipxe {
		mods = append(mods, dhcpv4.WithUserClass("iPXE", false),
			dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(175), []byte{19, 1, 1, 21, 1, 1})))
	}
	for {
		xid := rand.Uint32()
		var id dhcpv4.TransactionID
		binary.BigEndian.PutUint32(id[:], xid)
		disc, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithTransactionID(id),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover)}, mods...)...)
		if err != nil {
			return nil, err
		}
		ch := m.link.subscribe(xid)
		offer, err := m.exchange(ctx, disc, ch, dhcpv4.MessageTypeOffer)
		if err != nil {
			m.link.unsubscribe(xid)
			return nil, err
		}
		req, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithTransactionID(id),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(offer.ServerIdentifier()))}, mods...)...)
		if err != nil {
			m.link.unsubscribe(xid)
			return nil, err
		}
		ack, err := m.exchange(ctx, req, ch, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak)
		m.link.unsubscribe(xid)
		if err != nil {
			return nil, err
		}
		if ack.MessageType() == dhcpv4.MessageTypeNak {
			m.res.Retries++
			continue // back to DISCOVER, as RFC 2131 says
		}
		return ack, nil
	}
}

// exchange sends msg and waits for an answer of one of the types, sending
// msg again at each PXE timeout.
func (m *machine) exchange(ctx context.Context, msg *dhcpv4.DHCPv4, ch chan *dhcpv4.DHCPv4, types ...dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	for i, d := range dhcpTimeouts {
		if i > 0 {
			m.res.DHCPLost++
		}
		if err := m.link.send(m.mac, msg); err != nil {
			return nil, fmt.Errorf("dhcp send: %w", err)
		}
		t := time.NewTimer(d)
	wait:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
				break wait
			case rep := <-ch:
				if slices.Contains(types, rep.MessageType()) && bytes.Equal(rep.ClientHWAddr, m.mac) {
					t.Stop()
					return rep, nil
				}
			}
		}
	}
	m.res.DHCPLost++
	return nil, failure("dhcp: no " + types[0].String() + " after 4 tries")
}

// script fetches an iPXE script and follows it as iPXE would for the
// commands a boot script uses: chain loads another script; kernel and
// initrd name the images; boot ends it. Other commands (set, echo,
// imgfree, labels, goto) change nothing here.
func (m *machine) script(ctx context.Context, url string, depth int) (kernel, initrd string, err error) {
	if depth > 4 {
		return "", "", failure("ipxe: chain too deep")
	}
	var body []byte
	if err := m.retry(ctx, func() error {
		var e error
		body, e = m.get(ctx, url, 1<<20)
		return e
	}); err != nil {
		return "", "", err
	}
	if !bytes.HasPrefix(body, []byte("#!ipxe")) {
		return "", "", failure("ipxe: script without #!ipxe")
	}
	hyph, colon := hyphenMAC(m.mac), m.mac.String()
	expand := strings.NewReplacer("${netX/mac:hexhyp}", hyph, "${net0/mac:hexhyp}", hyph, "${mac:hexhyp}", hyph,
		"${netX/mac}", colon, "${net0/mac}", colon, "${mac}", colon, "${ip}", m.addr.String())
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "||"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(expand.Replace(line))
		if len(f) == 0 {
			continue
		}
		// The first argument that is not an option or an option's
		// value (iPXE's --name, --timeout and their short forms take
		// one unless written with "=").
		arg := ""
		for i := 1; i < len(f); i++ {
			a := f[i]
			if strings.HasPrefix(a, "-") {
				switch a {
				case "--name", "-n", "--timeout", "-t":
					i++
				}
				continue
			}
			arg = a
			break
		}
		switch f[0] {
		case "chain", "chainload":
			return m.script(ctx, arg, depth+1)
		case "kernel", "imgexec":
			kernel = arg
		case "initrd", "imgfetch", "module":
			initrd = arg
		case "boot":
			return kernel, initrd, nil
		}
	}
	return kernel, initrd, nil
}

// get fetches a small object whole.
func (m *machine) get(ctx context.Context, url string, max int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, failure("http: bad URL")
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, failure("http: " + classify(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max))
	m.res.HTTPBytes += int64(len(b))
	if err != nil {
		return nil, failure("http: " + classify(err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, failure(fmt.Sprintf("http: status %d", resp.StatusCode))
	}
	return b, nil
}

// fetch downloads an image and checks it has the size it should.
func (m *machine) fetch(ctx context.Context, url string, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return failure("http: bad URL")
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return failure("http: " + classify(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return failure(fmt.Sprintf("http: status %d", resp.StatusCode))
	}
	var w countWriter
	_, err = io.Copy(&w, resp.Body)
	m.res.HTTPBytes += w.n
	if err != nil {
		return failure("http: " + classify(err))
	}
	if w.n != size {
		return failure("http: image of the wrong size")
	}
	return nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// clientsMain is the clients process: it runs inside the client
// namespace, boots n machines at once (each starting within spread, as
// machines powered on together finish their POST at slightly different
// times) and prints a stormResult.
func clientsMain(ctx context.Context, cfg roleConfig) error {
	l, err := openLink(cfg.iface)
	if err != nil {
		return err
	}
	lctx, stop := context.WithCancel(ctx)
	var lwg sync.WaitGroup
	lwg.Go(func() { l.run(lctx) })
	defer func() { stop(); lwg.Wait() }()

	ifi, err := net.InterfaceByName(cfg.iface)
	if err != nil {
		return err
	}
	ms := make([]*machine, cfg.n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range ms {
		m := &machine{idx: i, mac: macFor(i), uefi: i%2 == 1, link: l, iface: cfg.iface,
			kernel: cfg.kernelSize, ramdisk: cfg.ramdiskSize, start: start,
			serverNS: cfg.serverNS, lladdr: ifi.HardwareAddr.String()}
		ip := func() netip.Addr { return m.addr }
		dialer := &net.Dialer{Timeout: 30 * time.Second}
		m.http = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				d := *dialer
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip(), 0))
				return d.DialContext(ctx, network, addr)
			},
			MaxIdleConnsPerHost: 1,
		}}
		ms[i] = m
		delay := time.Duration(0)
		if cfg.spread > 0 {
			delay = rand.N(cfg.spread)
		}
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			m.boot(ctx)
			m.http.CloseIdleConnections()
		})
	}
	wg.Wait()
	res := stormResult{Clients: cfg.n, Failures: map[string]int{}, PacketDrops: l.drops()}
	var done []float64
	for _, m := range ms {
		res.DHCPLost += m.res.DHCPLost
		res.Retries += m.res.Retries
		res.TFTPBytes += m.res.TFTPBytes
		res.HTTPBytes += m.res.HTTPBytes
		if m.res.Failed != "" {
			res.Failed++
			res.Failures[m.res.Failed]++
			continue
		}
		res.Done++
		done = append(done, m.res.DoneSec)
	}
	slices.Sort(done)
	if len(done) > 0 {
		res.AllDoneSec = done[len(done)-1]
		res.P50Sec = done[len(done)/2]
		res.P99Sec = done[min(len(done)-1, len(done)*99/100)]
	}
	if res.Failed > 0 {
		// Not every machine has its ramdisk: the time until all did is
		// the time the last one gave up.
		res.AllDoneSec = time.Since(start).Seconds()
	}
	if res.AllDoneSec > 0 {
		res.BytesPerSec = float64(res.TFTPBytes+res.HTTPBytes) / res.AllDoneSec
	}
	res.ClientCPUSec = procstat.SelfCPU().Seconds()
	return json.NewEncoder(os.Stdout).Encode(res)
}
