package vmlab

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anvilmetal/anvil/ramdisk"
	"golang.org/x/sys/unix"
)

// The provisioning network's fixed addresses: TEST-NET-1, which exists
// only inside the namespace.
const (
	// BridgeName is the bridge inside the namespace; the boot server
	// listens on it.
	BridgeName = "br0"
	// BridgeMAC is the bridge's (locally administered) MAC address.
	BridgeMAC = "02:00:c0:00:02:01"
	// ServerIP is the bridge's address: the boot server's.
	ServerIP = "192.0.2.1"
	// PrefixLen is the bridge address's prefix length.
	PrefixLen = 24
	// PoolStart and PoolEnd bound the addresses a DHCP server in a lab
	// hands out.
	PoolStart = "192.0.2.100"
	PoolEnd   = "192.0.2.150"
)

// The provisioning network's IPv6 addresses (Family IPv6 and Dual): a
// unique local /64 that exists only inside the namespace.
const (
	// ServerIP6 is the bridge's IPv6 address: the boot server's.
	ServerIP6 = "fd61:6e76:696c::1"
	// PrefixLen6 is its prefix length.
	PrefixLen6 = 64
	// PoolStart6 and PoolEnd6 bound the addresses a DHCPv6 server in a
	// lab hands out.
	PoolStart6 = "fd61:6e76:696c::100"
	PoolEnd6   = "fd61:6e76:696c::1ff"
)

// Family is the address families of a provisioning network.
type Family string

const (
	// IPv4 (the default): the bridge holds ServerIP only.
	IPv4 Family = "ipv4"
	// IPv6 is IPv6 only: the bridge holds ServerIP6 only, so nothing on
	// the network has an IPv4 address but what a machine makes itself.
	IPv6 Family = "ipv6"
	// Dual is dual-stack: the bridge holds ServerIP and ServerIP6.
	Dual Family = "dual"
)

// HasIPv4 and HasIPv6 say whether f's bridge holds an address of that
// family.
func (f Family) HasIPv4() bool { return f != IPv6 }
func (f Family) HasIPv6() bool { return f == IPv6 || f == Dual }

// namePrefix starts every namespace vmlab creates; the creator's PID
// follows, so that a later run can remove the namespaces of a run that was
// killed before its clean-up (see removeStale).
const namePrefix = "anvil-vm-"

// netnsDir is where `ip netns add` bind-mounts named namespaces.
const netnsDir = "/run/netns"

// Network is a provisioning network: a network namespace of its own with
// lo up, a bridge holding ServerIP, and one tap device per virtual
// machine. Nothing in it is connected to the host's network: no veth, no
// route out, so a test's DHCP server cannot answer anybody else and the
// machines cannot reach anything but the bridge.
//
// Close stops every process the network started (by PID) and deletes the
// namespace. A Network is safe for concurrent use.
type Network struct {
	name string
	log  *slog.Logger

	// forks carries the commands to start to the forker goroutine;
	// forkerDone is closed when it has ended (Close).
	forks      chan forkRequest
	forkerDone chan struct{}

	closeOnce // its mu guards what follows
	taps      int
	procs     []*Process
	stopRA    func()
	family    Family
}

// NetworkOptions configure NewNetwork.
type NetworkOptions struct {
	// Logger receives the commands run; nil means slog.Default().
	Logger *slog.Logger
	// RouterAdvertisements sends an IPv6 router advertisement with
	// nothing to configure (no prefix, lifetime 0, no DHCPv6) on the
	// bridge every second. iPXE's network configuration waits for IPv6
	// as well as DHCPv4: without a router it ends 15-20 s after the
	// DHCP acknowledgement under TCG, with this 0.1 s after. Off, the
	// network is the usual provisioning network without IPv6 routers.
	RouterAdvertisements bool
	// Family is the network's address families (default IPv4). An IPv6
	// or Dual network's bridge holds ServerIP6/64 (without duplicate
	// address detection, so servers bind at once) and does not snoop
	// multicast (DHCPv6 and neighbour discovery reach every port);
	// RouterAdvertisements must then be off: the lab's boot server
	// advertises the prefix with the managed flag instead.
	Family Family
}

// ErrUnavailable marks what a machine lacks to run a lab (not root, no
// `ip`, no QEMU, no apt): tests skip on it with its message.
var ErrUnavailable = ramdisk.ErrUnavailable

// NewNetwork creates the namespace, its bridge and lo. The caller must
// Close it. ctx bounds the setup commands.
func NewNetwork(ctx context.Context, opts NetworkOptions) (*Network, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: network namespaces need root", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: no ip command (Debian package iproute2)", ErrUnavailable)
	}
	log := cmp.Or(opts.Logger, slog.Default())
	family := cmp.Or(opts.Family, IPv4)
	switch family {
	case IPv4, IPv6, Dual:
	default:
		return nil, fmt.Errorf("vmlab: NetworkOptions.Family %q: want %q, %q or %q", opts.Family, IPv4, IPv6, Dual)
	}
	if family.HasIPv6() && opts.RouterAdvertisements {
		return nil, fmt.Errorf("vmlab: NetworkOptions.RouterAdvertisements with Family %q: the boot server advertises the IPv6 prefix", family)
	}
	removeStale(ctx, log)
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("vmlab: namespace name: %w", err)
	}
	n := &Network{
		name:       namePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:]),
		log:        log,
		forks:      make(chan forkRequest),
		forkerDone: make(chan struct{}),
		family:     family,
	}
	if err := run(ctx, "ip", "netns", "add", n.name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	go n.forker() // Close ends it
	steps := [][]string{
		{"link", "set", "lo", "up"},
		// forward_delay 0: a port forwards as soon as QEMU opens its tap,
		// so the firmware's first DHCP discover is not dropped.
		// A fixed address: a bridge without one takes its lowest port's
		// MAC, which changes as VMs come and go (and with it the source
		// of what the bridge sends).
		{"link", "add", BridgeName, "address", BridgeMAC, "type", "bridge", "forward_delay", "0"},
	}
	if family.HasIPv4() {
		steps = append(steps, []string{"addr", "add", ServerIP + "/" + strconv.Itoa(PrefixLen), "dev", BridgeName})
	}
	if family.HasIPv6() {
		steps = append(steps,
			[]string{"link", "set", BridgeName, "type", "bridge", "mcast_snooping", "0"},
			[]string{"addr", "add", ServerIP6 + "/" + strconv.Itoa(PrefixLen6), "dev", BridgeName, "nodad"})
	}
	steps = append(steps, []string{"link", "set", BridgeName, "up"})
	for _, s := range steps {
		if err := run(ctx, "ip", append([]string{"-n", n.name}, s...)...); err != nil {
			_ = n.Close()
			return nil, err
		}
	}
	if opts.RouterAdvertisements {
		stop, err := n.startRouterAdvertiser()
		if err != nil {
			_ = n.Close()
			return nil, err
		}
		n.stopRA = stop
	}
	log.Debug("vmlab: network created", "netns", n.name)
	return n, nil
}

// Name is the namespace's name (for `ip netns exec`).
func (n *Network) Name() string { return n.name }

// ServerAddr is the bridge's IPv4 address, where boot servers listen
// (an IPv6-only network's bridge does not hold it).
func (n *Network) ServerAddr() netip.Addr { return netip.MustParseAddr(ServerIP) }

// ServerAddr6 is the bridge's IPv6 address (an IPv6 or Dual network's).
func (n *Network) ServerAddr6() netip.Addr { return netip.MustParseAddr(ServerIP6) }

// Prefix6 is the provisioning network's IPv6 prefix.
func (n *Network) Prefix6() netip.Prefix {
	return netip.PrefixFrom(n.ServerAddr6(), PrefixLen6).Masked()
}

// Family is the network's address families.
func (n *Network) Family() Family { return n.family }

// Prefix is the provisioning network's prefix.
func (n *Network) Prefix() netip.Prefix {
	return netip.PrefixFrom(n.ServerAddr(), PrefixLen).Masked()
}

// AddTap creates a new tap device in the namespace, attached to the
// bridge and up, and returns its name (tap0, tap1, ...). QEMU opens it by
// name, so it must run inside the namespace (Command does that).
func (n *Network) AddTap(ctx context.Context) (string, error) {
	if err := n.lockOpen("vmlab: network is closed"); err != nil {
		return "", err
	}
	tap := "tap" + strconv.Itoa(n.taps)
	n.taps++
	n.mu.Unlock()
	for _, s := range [][]string{
		{"tuntap", "add", "dev", tap, "mode", "tap"},
		{"link", "set", tap, "master", BridgeName},
		{"link", "set", tap, "up"},
	} {
		if err := run(ctx, "ip", append([]string{"-n", n.name}, s...)...); err != nil {
			return "", err
		}
	}
	return tap, nil
}

// Do runs fn with its OS thread in the namespace, and returns fn's error.
// Sockets fn opens belong to the namespace for their whole life, whichever
// thread later uses them: this is how a Go server (the boot server, an
// HTTP server) listens on the bridge. Goroutines fn starts do not run in
// the namespace, so fn must open its sockets itself before it returns.
//
// fn runs on a goroutine of its own that locks its thread and never
// unlocks it: when that goroutine ends, the Go runtime destroys the thread
// instead of returning it to the pool in the wrong namespace, so no
// restore step can fail and leave a thread behind in the namespace. (Go
// starts new threads from a clean template thread while the current one is
// locked, so the namespace does not leak to new threads either.) This is
// sturdier than re-executing the test binary under `ip netns exec`, which
// would split the test into two processes that share nothing.
func (n *Network) Do(fn func() error) error { return <-n.Go(fn) }

// Go is Do without waiting: it returns at once, and fn's error arrives on
// the channel when fn returns. It suits a server whose Run(ctx) opens its
// sockets on its calling goroutine and then blocks until ctx ends: the
// goroutine keeps its thread in the namespace all that time.
func (n *Network) Go(fn func() error) <-chan error {
	done := make(chan error, 1)
	fd, err := unix.Open(netnsDir+"/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		done <- fmt.Errorf("vmlab: open namespace %s: %w", n.name, err)
		return done
	}
	go func() {
		defer unix.Close(fd)
		runtime.LockOSThread()
		// No UnlockOSThread: see Do.
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("vmlab: enter namespace %s: %w", n.name, err)
			return
		}
		done <- fn()
	}()
	return done
}

// Command returns a command that runs name inside the namespace (through
// `ip netns exec`, which execs name: the started process's PID is name's).
func (n *Network) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...)
	// A backstop for a test binary killed before its clean-up: the kernel
	// kills the child when the thread that started it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start starts cmd (from Command) and tracks it: Close stops it by PID if
// it is still running.
func (n *Network) Start(name string, cmd *exec.Cmd) (*Process, error) {
	if err := n.lockOpen("vmlab: network is closed"); err != nil {
		return nil, err
	}
	defer n.mu.Unlock()
	p, err := startProcess(name, cmd, n.fork)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

// forkRequest is a command for the forker to start, and where its
// Start's error goes.
type forkRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// forker starts every process of the network from one OS thread that
// lives exactly as long as the network. A child's Pdeathsig (Command's
// backstop) fires when the thread that forked it ends, and any thread of
// Go's pool can end: a goroutine that locks the thread it runs on and
// returns without unlocking it (Network.Do's, by design) takes that
// thread down, and it may be the very thread an earlier cmd.Start ran
// on. The forker's thread is locked to it, so no other goroutine runs
// there, and it ends only when Close has stopped the processes.
func (n *Network) forker() {
	runtime.LockOSThread() // never unlocked: the thread ends with the network
	defer close(n.forkerDone)
	for req := range n.forks {
		req.done <- req.cmd.Start()
	}
}

// fork starts cmd on the forker's thread. Start calls it with n.mu held,
// and Close closes n.forks only after it has marked n closed under n.mu.
func (n *Network) fork(cmd *exec.Cmd) error {
	req := forkRequest{cmd: cmd, done: make(chan error, 1)}
	n.forks <- req
	return <-req.done
}

// Close stops the processes the network started and deletes the
// namespace (which removes its bridge and taps). It is idempotent.
func (n *Network) Close() error {
	var procs []*Process
	var stopRA func()
	if !n.begin(func() {
		procs, stopRA = n.procs, n.stopRA
		n.procs, n.stopRA = nil, nil
	}) {
		return nil
	}
	if stopRA != nil {
		stopRA()
	}
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	close(n.forks)
	<-n.forkerDone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, "ip", "netns", "delete", n.name); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeStale deletes the namespaces of earlier runs whose process no
// longer exists (a test binary killed before its clean-up), first killing
// by PID what still runs in them (`ip netns pids`). A namespace of a live
// process, or one vmlab did not name, is never touched.
func removeStale(ctx context.Context, log *slog.Logger) {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		if out, err := exec.CommandContext(ctx, "ip", "netns", "pids", e.Name()).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				if p, err := strconv.Atoi(f); err == nil && p > 1 {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
		}
		if err := run(ctx, "ip", "netns", "delete", e.Name()); err == nil {
			log.Info("vmlab: removed a stale namespace", "netns", e.Name())
		}
	}
}

// run runs a setup command and returns an error quoting its output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("vmlab: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// AddHost adds a second host to the provisioning network, inside the
// namespace: a veth pair whose one end is a port of the bridge and whose
// other end, named name (at most 11 bytes; the bridge end is name+"-br"),
// holds addr and is up. A server bound to name (SO_BINDTODEVICE) gets the
// broadcasts of the machines on the bridge and answers them through the
// bridge, as a separate machine would: the proxyDHCP test runs the
// address-only DHCP server there.
func (n *Network) AddHost(ctx context.Context, name string, addr netip.Prefix) error {
	if name == "" || len(name) > 11 || strings.ContainsAny(name, "/ \t") {
		return fmt.Errorf("vmlab: host interface name %q: want 1-11 bytes without slash or space", name)
	}
	if !n.Prefix().Contains(addr.Addr()) || addr.Bits() != PrefixLen {
		return fmt.Errorf("vmlab: host address %s: want one in %s", addr, n.Prefix())
	}
	peer := name + "-br"
	for _, s := range [][]string{
		{"link", "add", name, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "master", BridgeName},
		{"addr", "add", addr.String(), "dev", name},
		{"link", "set", peer, "up"},
		{"link", "set", name, "up"},
	} {
		if err := run(ctx, "ip", append([]string{"-n", n.name}, s...)...); err != nil {
			return err
		}
	}
	return nil
}
