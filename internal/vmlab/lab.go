package vmlab

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/dhcp6"
	"github.com/anvilmetal/anvil/netboot/ra"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
	"github.com/anvilmetal/anvil/statemachine"
)

// The lab's machine: its NIC's MAC and the hostname its config drive
// gives it.
const (
	LabMAC      = "52:54:00:e2:e0:01"
	LabHostname = "anvil-vm-e2e"
)

// The lab's fixed addresses on the provisioning network (the bridge).
const (
	e2eBootHTTP  = "8080" // netboot's HTTP (iPXE scripts, kernel, ramdisk)
	e2eImageHTTP = "8081" // the image server IPA downloads from
	e2eAgentAPI  = "6385" // the conductor's agent API
	e2eMAC       = LabMAC
	e2eRootDisk  = "anvil-root"
	e2eSpareDisk = "anvil-spare"
	e2eHostname  = LabHostname
	// e2eHeartbeatTimeout is [api]ramdisk_heartbeat_timeout given to the
	// agent at lookup: IPA heartbeats every 30 to 60 % of it.
	e2eHeartbeatTimeout = 30 * time.Second
)

// IPMIPluginPackage is the main package of the ipmi plugin executable
// (BuildPlugin's pkg for IPMILabBMC).
const IPMIPluginPackage = "github.com/anvilmetal/anvil/plugins/ipmi"

// LabMachine is the machine under test, whatever its BMC (a *BMCMachine
// or a *RedfishMachine).
type LabMachine interface {
	Powered() bool
	Starts() []time.Time
	Events() []string
	Close() error
	serial() *Console
}

func (m *BMCMachine) serial() *Console     { return m.Console }
func (m *RedfishMachine) serial() *Console { return m.Console }

// LabBMC is what differs between labs of two kinds of BMC: the hardware
// type and interfaces, the machine, and the node's fields.
type LabBMC struct {
	HardwareType  string
	Boot, Console string
	// Prepare runs before the plugin is loaded (its environment) and the
	// machine starts, with the lab's temporary directory; may be nil.
	Prepare func(lab *Lab, rd IPARamdisk, dir string) error
	// Start starts the machine with the disks and sets the lab's BMC
	// driver_info (SetDriverInfo).
	Start func(ctx context.Context, lab *Lab, dir string, disks []Disk, logger *slog.Logger) (LabMachine, error)
	// Node fills the node's name, driver, interfaces and driver_info.
	Node func(lab *Lab, nd *baremetal.Node)
}

// IPMILabBMC is ipmi_sim (BMCMachine, 1 vCPU, 1 GiB) with the ipmi
// hardware type, ipxe boot and the ipmitool-socat console. Its plugin is
// built from IPMIPluginPackage.
func IPMILabBMC() LabBMC {
	return LabBMC{
		HardwareType: ipmitool.HardwareType, Boot: pxe.NameIPXE, Console: ipmisol.Name,
		Start: func(ctx context.Context, lab *Lab, dir string, disks []Disk, logger *slog.Logger) (LabMachine, error) {
			m, err := StartBMCMachine(ctx, lab.n, BMCMachineOptions{
				Name: "vm-ipmi", MAC: e2eMAC, MemoryMB: 1024, CPUs: 1, Dir: dir, Password: "vm-bmc-pw-1", Disks: disks, Logger: logger,
				// UEFI: OVMF's own PXE asks for iPXE by its architecture.
				Firmware: lab.firmware, NoROM: lab.firmware == UEFI, SecureBoot: lab.secureBoot,
			})
			if err != nil {
				return nil, err
			}
			lab.bmcInfo = map[string]any{
				"ipmi_address": m.Addr, "ipmi_port": strconv.Itoa(m.Port), "ipmi_username": m.Username,
				"ipmi_password": m.Password, "ipmi_cipher_suite": "3",
			}
			return m, nil
		},
		Node: func(lab *Lab, nd *baremetal.Node) {
			nd.Name, nd.Driver = "vm-ipmi-0", ipmitool.HardwareType
			nd.BootInterface, nd.ConsoleInterface = pxe.NameIPXE, ipmisol.Name
			nd.DriverInfo = lab.bmcInfo
		},
	}
}

// LabImages are the two images a lab needs, with how long getting each
// took (a build, or a cache hit).
type LabImages struct {
	Ramdisk             IPARamdisk
	OS                  OSImage
	RamdiskTime, OSTime time.Duration
}

// BuildLabImages builds the IPA ramdisk from tarball and the OS image,
// or takes them from c. Missing tools wrap ErrUnavailable.
func BuildLabImages(ctx context.Context, c Cache, tarball string) (LabImages, error) {
	var im LabImages
	var err error
	start := time.Now()
	if im.Ramdisk, err = BuildIPARamdisk(ctx, c, tarball); err != nil {
		return im, err
	}
	im.RamdiskTime = time.Since(start)
	start = time.Now()
	if im.OS, err = BuildOSImage(ctx, c); err != nil {
		return im, err
	}
	im.OSTime = time.Since(start)
	return im, nil
}

// BuildPlugin builds the plugin executable of main package pkg (an
// import path of the current module, or a directory) into dir as
// anvil-driver-<name>, with the go command, and returns its path.
func BuildPlugin(ctx context.Context, pkg, name, dir string) (string, error) {
	out := filepath.Join(dir, "anvil-driver-"+name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("vmlab: building plugin %s from %s: %w\n%s", name, pkg, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// LabOptions configure StartLab.
type LabOptions struct {
	// Network is the provisioning network; nil: StartLab creates one
	// of Family (with RouterAdvertisements on an IPv4 one) and Close
	// removes it.
	Network *Network
	// Family is the address families of the network StartLab creates
	// when Network is nil (default IPv4); a given Network's own is used
	// otherwise. On an IPv6 network the boot server answers DHCPv6
	// (stateful) beside router advertisements with the managed flag and
	// the network's prefix, and every server of the lab (boot, images,
	// agent API) is reached at ServerIP6: ipa-api-url is
	// http://[ServerIP6]:6385, and the ramdisk configures its NIC with
	// DHCPv6. On a Dual network the boot server answers DHCPv4 and
	// DHCPv6 (TFTP on IPv4 only), the servers listen on both families,
	// the agent API and the images are given by their IPv6 URL, and the
	// ramdisk runs DHCPv4 and DHCPv6 (anvil.dhcp=4,6).
	Family Family
	// BMC is the kind of machine (IPMILabBMC).
	BMC LabBMC
	// PluginPath is the BMC's plugin executable, anvil-driver-<name>
	// (BuildPlugin).
	PluginPath string
	// IPATarball is the IPA source the ramdisk is built from, when
	// Images is nil.
	IPATarball string
	// Images, when set, are used instead of building them (BuildLabImages).
	Images *LabImages
	// PollCommands is the conductor's AgentSettings.PollCommands (it can
	// be changed later with Conductor().SetPollCommands).
	PollCommands bool
	// SyncPowerStateInterval is the conductor's power (and health) sync
	// period; zero is the conductor's default.
	SyncPowerStateInterval time.Duration
	// MoreInterfaces are enabled beside the lab's (the ramdisk deploy
	// interface, the BMC's out-of-band inspect interface, ...).
	MoreInterfaces map[driver.Kind][]string
	// Logf receives the lab's progress lines; nil drops them.
	Logf func(format string, args ...any)
	// Began is when the caller's run began (zero: StartLab's call); the
	// images phase is timed from it.
	Began time.Time
	// Firmware is the machine's: BIOS (default) or UEFI. A UEFI lab
	// also serves the UEFI OS image (BuildUEFIOSImage), and its node
	// has the boot_mode:uefi capability and deploys that image.
	Firmware Firmware
	// SecureBoot (UEFI only): the machine's firmware is OVMF's secure
	// boot build with Microsoft's keys enrolled and secure boot on
	// (BMCMachineOptions.SecureBoot: IPMILabBMC's Start reads
	// Lab.SecureBoot; the Redfish machine has no secure boot firmware
	// yet), the node asks for secure_boot:true beside
	// boot_mode:uefi, and the lab serves the secure boot OS image
	// (BuildSecureBootOSImage) instead of the UEFI one, at
	// UEFIInstanceInfo.
	SecureBoot bool
	// PartitionImage: also serve the partition image
	// (BuildPartitionImage) for PartitionInstanceInfo.
	PartitionImage bool
	// SoftwareRAID: also serve the software RAID images
	// (BuildRAIDOSImage, made of the partition image) for
	// RAIDInstanceInfo, and let IPA install GRUB (its
	// enable_bios_bootloader_install), which a BIOS software RAID
	// needs.
	SoftwareRAID bool
	// TracerProvider, when set, traces the conductor's operations, the
	// agent client's commands and the plugin calls (Options.TracerProvider
	// of each); PluginEnv is added to the plugin process's environment
	// (its OTLP exporter's OTEL_EXPORTER_OTLP_* settings).
	TracerProvider trace.TracerProvider
	PluginEnv      []string
}

// Lab is one machine of the lab ready to provision: the provisioning
// network, Anvil's boot server (DHCP, TFTP, HTTP) on its bridge, the
// image server, the conductor with the BMC's plugin, the direct deploy
// and agent inspect interfaces and its agent API, and the machine with
// two disks (the root disk the node's root device hints name, holding an
// old installation, and a blank spare). Close stops all of it.
type Lab struct {
	n         *Network
	kind      LabBMC
	m         LabMachine
	bmcInfo   map[string]any // the node's driver_info for the BMC
	deployISO string         // the IPA ISO, for virtual media
	rd        IPARamdisk     // the IPA ramdisk's kernel and initramfs
	cond      *conductor.Conductor
	reg       *driver.Registry
	store     baremetal.Store
	img       OSImage
	rootImg   string // the root disk's file
	spare     string
	condLog   string
	tl        *timeline
	began     time.Time
	node      string
	images    *imagecache.Cache // the conductor's image cache (labimages.go)
	firmware  Firmware
	// serverHost is where the machine reaches the lab's servers
	// (ServerIP, or ServerIP6 on an IPv6 or Dual network).
	serverHost string
	uefiImg    UEFIOSImage // a UEFI lab's image
	uefiPath   string      // its path on the image server
	secureBoot bool
	partImg    PartitionImage
	raidImg    RAIDOSImage

	closeOnce                // its mu guards closers
	closers   []func() error // run in reverse by Close
}

// timeline keeps what happened, from every source, with its time.
type timeline struct {
	mu     sync.Mutex
	events []tlEvent
}

type tlEvent struct {
	At           time.Time
	Source, What string
	// Peer is the client's address of an HTTP request (recordRequests).
	Peer netip.Addr
}

func (tl *timeline) add(source, what string) { tl.addFrom(source, what, netip.Addr{}) }

func (tl *timeline) addFrom(source, what string, peer netip.Addr) {
	tl.mu.Lock()
	tl.events = append(tl.events, tlEvent{At: time.Now(), Source: source, What: what, Peer: peer})
	tl.mu.Unlock()
}

func (tl *timeline) between(from, to time.Time) []tlEvent {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []tlEvent
	for _, e := range tl.events {
		if !e.At.Before(from) && !e.At.After(to) {
			out = append(out, e)
		}
	}
	return out
}

// lateResolver is the boot server's Resolver, the conductor once it exists.
type lateResolver struct {
	c atomic.Pointer[conductor.Conductor]
}

func (r *lateResolver) NodeForMAC(ctx context.Context, mac string) (string, bool, error) {
	c := r.c.Load()
	if c == nil {
		return "", false, nil
	}
	return c.NodeForMAC(ctx, mac)
}

// statusWriter records an HTTP response's status.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// recordRequests logs every request of h to the timeline (the agent
// token, a query parameter, is left out).
func recordRequests(tl *timeline, source string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		p := r.URL.Path
		if strings.HasPrefix(p, labImagesPath) {
			p = labImagesPath + "<token>" // a node's image URL is a capability
		}
		var peer netip.Addr
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			peer = ap.Addr().Unmap()
		}
		tl.addFrom(source, fmt.Sprintf("%s %s → %d", r.Method, p, sw.code), peer)
	})
}

// listenIn opens a TCP listener inside the lab's namespace.
func listenIn(n *Network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// sparseFile makes a sparse file of size bytes.
func sparseFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cleanup adds fn to what Close runs (last added, first run).
func (lab *Lab) cleanup(fn func() error) {
	lab.mu.Lock()
	lab.closers = append(lab.closers, fn)
	lab.mu.Unlock()
}

// Close stops the machine (its processes by PID), the conductor, the
// servers, removes the lab's files and, when StartLab made it, the
// network. It is safe to call more than once.
func (lab *Lab) Close() error {
	var closers []func() error
	if !lab.begin(func() { closers, lab.closers = lab.closers, nil }) {
		return nil
	}
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StartLab builds (or takes from the cache) the images, starts the
// servers and the conductor on the network, and starts the machine
// (powered off: its BMC is up). ctx bounds the start and is the servers'
// and the conductor's lifetime. An image or a boot file that cannot be
// made for lack of tools is an error wrapping ErrUnavailable, or a
// *netboot.MissingFileError, returned unwrapped. On an error (or a
// Prepare that exits its goroutine) everything started is stopped.
func StartLab(ctx context.Context, o LabOptions) (_ *Lab, err error) {
	lab := &Lab{n: o.Network, kind: o.BMC, tl: &timeline{}, began: o.Began, firmware: cmp.Or(o.Firmware, BIOS), secureBoot: o.SecureBoot}
	if lab.firmware != BIOS && lab.firmware != UEFI {
		return nil, fmt.Errorf("vmlab: lab firmware %q: want %q or %q", o.Firmware, BIOS, UEFI)
	}
	if lab.secureBoot && lab.firmware != UEFI {
		return nil, errors.New("vmlab: a secure boot lab needs UEFI firmware")
	}
	if lab.began.IsZero() {
		lab.began = time.Now()
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ok := false
	defer closeUnless(&ok, lab)
	if lab.n == nil {
		nctx, ncancel := context.WithTimeout(ctx, time.Minute)
		fam := cmp.Or(o.Family, IPv4)
		lab.n, err = NewNetwork(nctx, NetworkOptions{RouterAdvertisements: fam == IPv4, Family: fam})
		ncancel()
		if err != nil {
			return nil, err
		}
		lab.cleanup(lab.n.Close)
	}
	n := lab.n
	var rd IPARamdisk
	if o.Images != nil {
		rd, lab.img = o.Images.Ramdisk, o.Images.OS
	} else {
		cache, err := DefaultCache()
		if err != nil {
			return nil, err
		}
		bctx, bcancel := context.WithTimeout(ctx, 30*time.Minute)
		defer bcancel()
		rd, err = BuildIPARamdisk(bctx, cache, o.IPATarball)
		if err != nil {
			return nil, err
		}
		lab.img, err = BuildOSImage(bctx, cache)
		if err != nil {
			return nil, err
		}
	}
	if lab.firmware == UEFI {
		cache, err := DefaultCache()
		if err != nil {
			return nil, err
		}
		bctx, bcancel := context.WithTimeout(ctx, 5*time.Minute)
		if lab.secureBoot {
			lab.uefiImg, err = BuildSecureBootOSImage(bctx, cache, lab.img)
			lab.uefiPath = "/disk-uefi-sb.raw"
		} else {
			lab.uefiImg, err = BuildUEFIOSImage(bctx, cache, lab.img)
			lab.uefiPath = "/disk-uefi.raw"
		}
		bcancel()
		if err != nil {
			return nil, err
		}
	}
	if o.PartitionImage || o.SoftwareRAID {
		cache, err := DefaultCache()
		if err != nil {
			return nil, err
		}
		bctx, bcancel := context.WithTimeout(ctx, 20*time.Minute)
		lab.partImg, err = BuildPartitionImage(bctx, cache, lab.img)
		bcancel()
		if err != nil {
			return nil, err
		}
		if o.SoftwareRAID {
			bctx, bcancel := context.WithTimeout(ctx, 5*time.Minute)
			lab.raidImg, err = BuildRAIDOSImage(bctx, cache, lab.partImg)
			bcancel()
			if err != nil {
				return nil, err
			}
		}
	}
	lab.rd = rd
	dir, err := os.MkdirTemp("", "vme2e-") // short: Unix socket paths
	if err != nil {
		return nil, err
	}
	lab.cleanup(func() error { os.RemoveAll(dir); return nil })
	if o.BMC.Prepare != nil {
		if err := o.BMC.Prepare(lab, rd, dir); err != nil {
			return nil, err
		}
	}
	logf("phase images: %.1fs (IPA ramdisk built now: %v, OS image built now: %v, firmware %s, secure boot %v, UEFI OS image built now: %v)",
		time.Since(lab.began).Seconds(), rd.Built, lab.img.Built, lab.firmware, lab.secureBoot, lab.uefiImg.Built)
	family := n.Family()
	// host is where the machines reach the lab's servers; listen where
	// the servers listen (both families on a dual-stack network, inside
	// the namespace only).
	host, listen := ServerIP, ServerIP
	switch family {
	case IPv6:
		host, listen = ServerIP6, ServerIP6
	case Dual:
		host, listen = ServerIP6, "::"
	}
	lab.serverHost = host

	// The disks: vda the root disk the hints name (6 GiB), holding an
	// old installation (the OS image) that cleaning must erase; vdb a
	// blank spare (5 GiB), which IPA would pick without the hints (the
	// smallest disk of at least 4 GiB).
	lab.spare, lab.rootImg = filepath.Join(dir, "spare.raw"), filepath.Join(dir, "root.raw")
	if err := sparseFile(lab.spare, 5<<30); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(lab.img.Raw)
	if err != nil {
		return nil, err
	}
	if err := sparseFile(lab.rootImg, 6<<30); err != nil {
		return nil, err
	}
	if err := writeAt(lab.rootImg, raw, 0); err != nil {
		return nil, err
	}

	// The image server.
	images := http.NewServeMux()
	imageFiles := map[string]string{"/disk.raw": lab.img.Raw, "/disk.qcow2": lab.img.QCOW2}
	if lab.uefiImg.Raw != "" {
		imageFiles[lab.uefiPath] = lab.uefiImg.Raw
	}
	if lab.partImg.QCOW2 != "" {
		imageFiles["/root.qcow2"] = lab.partImg.QCOW2
		imageFiles["/vmlinuz"] = lab.partImg.Kernel
		imageFiles["/initrd"] = lab.partImg.Ramdisk
	}
	if lab.raidImg.BIOS != "" {
		imageFiles["/raid-bios.qcow2"] = lab.raidImg.BIOS
		imageFiles["/raid-uefi.qcow2"] = lab.raidImg.UEFI
	}
	for name, path := range imageFiles {
		images.HandleFunc("GET "+name, func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, path) })
	}
	imgLn, err := listenIn(n, net.JoinHostPort(listen, e2eImageHTTP))
	if err != nil {
		return nil, err
	}
	imgSrv := &http.Server{Handler: recordRequests(lab.tl, "images", images), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = imgSrv.Serve(imgLn) }()
	lab.cleanup(func() error { imgSrv.Close(); return nil })

	// The boot server.
	logFile := filepath.Join(dir, "anvil.log")
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	lab.cleanup(func() error { lf.Close(); return nil })
	lab.condLog = logFile
	logger := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	resolver := &lateResolver{}
	observe := stage.ObserverFunc(func(r stage.Record) {
		lab.tl.add("netboot", r.Phrase())
		if c := resolver.c.Load(); c != nil {
			c.ObserveBootStage(r)
		}
	})
	bootOpts := netboot.Options{
		HTTPBase: "http://" + net.JoinHostPort(ServerIP, e2eBootHTTP), TFTPServer: n.ServerAddr(),
		Resolver: resolver, Observer: observe, Logger: logger.With("component", "netboot"),
	}
	if lab.firmware == UEFI && family.HasIPv4() {
		// The http boot interface's GRUB, for this boot server (its
		// IPv4 address: the GRUB netboot/grubimage builds is IPv4 only).
		cache, err := DefaultCache()
		if err != nil {
			return nil, err
		}
		if bootOpts.HTTPGRUB, err = BuildHTTPGRUB(ctx, cache, bootOpts.HTTPBase); err != nil {
			return nil, err
		}
	}
	listenOpts := netboot.ListenOptions{
		TFTPAddr: net.JoinHostPort(ServerIP, "69"),
		HTTPAddr: net.JoinHostPort(listen, e2eBootHTTP),
		TFTP: &tftp.Server{ListenTransfer: func(local netip.Addr) (c *net.UDPConn, err error) {
			err = n.Do(func() error {
				c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
				return err
			})
			return c, err
		}},
	}
	if family.HasIPv4() {
		listenOpts.DHCP = &dhcp.Options{Mode: dhcp.Authoritative, Interface: BridgeName, ServerIP: n.ServerAddr(),
			Subnet: n.Prefix(), PoolStart: netip.MustParseAddr(PoolStart), PoolEnd: netip.MustParseAddr(PoolEnd)}
	}
	if family.HasIPv6() {
		base6 := "http://" + net.JoinHostPort(ServerIP6, e2eBootHTTP)
		bootOpts.HTTPBase6, bootOpts.TFTPServer6 = base6, n.ServerAddr6()
		listenOpts.DHCP6 = &dhcp6.Options{Mode: dhcp6.Stateful, Interface: BridgeName, ServerAddr: n.ServerAddr6(),
			Prefix: n.Prefix6(), PoolStart: netip.MustParseAddr(PoolStart6), PoolEnd: netip.MustParseAddr(PoolEnd6),
			Preference: 255}
		// The managed flag: addresses from DHCPv6; the prefix on-link
		// (not autonomous), so a machine reaches the servers directly.
		listenOpts.RA = &ra.Options{Interface: BridgeName, Prefix: n.Prefix6(), Managed: true, Interval: 3 * time.Second,
			Logger: logger.With("component", "ra")}
		if family == IPv6 {
			// IPv6 only: TFTP on the IPv6 address, and the IPv6 base
			// for every URL.
			bootOpts.HTTPBase, bootOpts.TFTPServer = base6, netip.Addr{}
			listenOpts.TFTPAddr = net.JoinHostPort(ServerIP6, "69")
		}
	}
	srv, err := netboot.New(bootOpts)
	if err != nil {
		return nil, err
	}
	var listeners *netboot.Listeners
	if err := n.Do(func() error {
		var err error
		listeners, err = srv.Listen(listenOpts)
		return err
	}); err != nil {
		return nil, err
	}
	sctx, scancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- listeners.Serve(sctx) }()
	lab.cleanup(func() error {
		scancel()
		select {
		case <-served:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the boot server did not stop within 10 s")
		}
	})

	// The drivers: the real BMC plugin, the network boot interfaces over
	// the boot server, the direct deploy and agent inspect interfaces.
	client, err := agentclient.NewClient(agentclient.ClientConfig{
		CommandTimeout: 60 * time.Second, Logger: logger.With("component", "agentclient"), TracerProvider: o.TracerProvider,
		// The agents are on the lab bridge, inside the namespace.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := n.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	})
	if err != nil {
		return nil, err
	}
	lab.cleanup(func() error { client.Close(); return nil })
	enabled := map[driver.Kind][]string{
		driver.KindBoot:    bootInterfaces(o),
		driver.KindDeploy:  {agentdeploy.Name},
		driver.KindInspect: {agentdeploy.InspectName, driver.NoInspect},
		driver.KindConsole: {o.BMC.Console, driver.NoConsole},
		driver.KindRescue:  {driver.NoRescue, agentdeploy.RescueName},
		// In-band RAID (IPA's software RAID), for a node that names it.
		driver.KindRAID: {driver.NoRAID, agentdeploy.RAIDName},
	}
	for k, names := range o.MoreInterfaces {
		enabled[k] = append(enabled[k], names...)
	}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{o.BMC.HardwareType}, EnabledInterfaces: enabled})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		return nil, err
	}
	// rootfstype=ramfs: the 1 GiB machine's tmpfs root (half its
	// memory) would truncate the unpacked initramfs. The ramdisk runs
	// DHCP of ipa-api-url's family unless anvil.dhcp says otherwise.
	appendParams := "console=ttyS0,115200 rootfstype=ramfs ipa-debug=1"
	switch family {
	case Dual:
		appendParams += " anvil.dhcp=4,6"
	case IPv6:
		// IPA's inspection waits (60 s by default) for its NIC's IPv4
		// address, and only IPv4 ("only supports IPv4 addresses for
		// now", inspector.wait_for_dhcp); the ramdisk's /init has
		// waited for the DHCPv6 address already.
		appendParams += " ipa-inspection-dhcp-wait-timeout=0"
	}
	boot := pxe.New(srv, pxe.Options{
		DefaultBootMode: netboot.BIOS, DeployKernel: rd.Kernel.Path, DeployRamdisk: rd.Initramfs,
		// The lab's IPA ramdisk is a rescue ramdisk too (Ironic's
		// [conductor]rescue_kernel and rescue_ramdisk).
		RescueKernel: rd.Kernel.Path, RescueRamdisk: rd.Initramfs,
		KernelAppendParams: appendParams,
	})
	if err := reg.Register(boot.Bundle()); err != nil {
		return nil, err
	}
	// The serial console over IPMI SOL (ipmitool sol activate, served on
	// 127.0.0.1 by the console manager).
	cm := console.NewManager(console.Options{Logger: logger.With("component", "console")})
	lab.cleanup(func() error { cm.Close(); return nil })
	if o.BMC.Console == ipmisol.Name {
		if err := reg.Register(ipmisol.New(cm, ipmisol.Options{Logger: logger.With("component", "ipmisol")}).Bundle()); err != nil {
			return nil, err
		}
	}
	// The conductor's image cache (image_download_source local), served
	// to the agents on the agent API's listener; it reaches registries
	// on the host's loopback over HTTP.
	cache, deployOpts, err := lab.startImageCache(dir, "http://"+net.JoinHostPort(host, e2eAgentAPI)+labImagesPath, logger)
	if err != nil {
		return nil, err
	}
	// The boot mode of nodes without one, as the boot interface's.
	deployOpts.DefaultBootMode = netboot.BIOS
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.NewWithOptions(client, deployOpts)); err != nil {
		return nil, err
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.RamdiskName, agentdeploy.NewRamdisk()); err != nil {
		return nil, err
	}
	inspect, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{Logger: logger.With("component", "inspect")})
	if err != nil {
		return nil, err
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, inspect); err != nil {
		return nil, err
	}
	if err := reg.RegisterInterface(driver.KindRescue, agentdeploy.RescueName, agentdeploy.NewRescue()); err != nil {
		return nil, err
	}
	if err := reg.RegisterInterface(driver.KindRAID, agentdeploy.RAIDName, agentdeploy.NewRAID()); err != nil {
		return nil, err
	}
	if err := lab.loadPlugin(ctx, o.PluginPath, reg, dir, o.TracerProvider, o.PluginEnv); err != nil {
		return nil, err
	}

	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		return nil, err
	}
	lab.cleanup(func() error { store.Close(); return nil })
	lab.store = store
	apiURL := "http://" + net.JoinHostPort(host, e2eAgentAPI)
	cond, err := conductor.New(store, reg, conductor.Options{
		Hostname: "vmlab-conductor", Logger: logger.With("component", "conductor"), TracerProvider: o.TracerProvider,
		SyncPowerStateInterval: o.SyncPowerStateInterval,
		// The power state is read every second while the agent powers
		// the machine off (Ironic's post_deploy_get_power_state_retry_interval,
		// 5 s by default): the BMC answers on the loopback at once.
		Agent: conductor.AgentSettings{Client: client, APIURL: apiURL, FastTrack: true, PollCommands: o.PollCommands,
			PowerOffPollInterval: time.Second},
		// Ironic's [deploy]erase_devices_priority = 0: shredding a disk
		// under TCG takes far too long; erase_devices_metadata (IPA's
		// priority 99) stays.
		CleanStepPriorityOverride: map[string]int{"deploy.erase_devices": 0},
		// Under TCG on a loaded machine the agent starts minutes after
		// its ramdisk's download (five, at load 20).
		BootStageDeadlines: stage.Deadlines{Agent: 20 * time.Minute},
	})
	if err != nil {
		return nil, err
	}
	lookup := agentclient.DefaultLookupConfig()
	// A partition image needs grub-install, which IPA refuses unless
	// the lookup answer enables it (its enable_bios_bootloader_install,
	// off by default since a CVE mitigation); so does a whole-disk image
	// on a BIOS machine's software RAID (GRUB on each holder disk).
	lookup.EnableBIOSBootloaderInstall = o.PartitionImage || o.SoftwareRAID
	h, err := agentclient.NewHandler(cond.AgentBackend(), agentclient.HandlerConfig{
		HeartbeatTimeout: e2eHeartbeatTimeout, Logger: logger.With("component", "agentapi"), Lookup: &lookup})
	if err != nil {
		return nil, err
	}
	apiLn, err := listenIn(n, net.JoinHostPort(listen, e2eAgentAPI))
	if err != nil {
		return nil, err
	}
	api := agentclient.NewServer(recordRequests(lab.tl, "agent-api", withImages(h, cache)), agentclient.ServerConfig{})
	go func() { _ = api.Serve(apiLn) }()
	lab.cleanup(func() error { api.Close(); return nil })
	if err := cond.Launch(ctx); err != nil {
		return nil, err
	}
	lab.cleanup(func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cond.Stop(sctx)
		return nil
	})
	resolver.c.Store(cond)
	lab.cond = cond
	lab.reg = reg

	mctx, mcancel := context.WithTimeout(ctx, 10*time.Minute) // the VM slot may be busy
	defer mcancel()
	// The root disk first: SeaBIOS boots the first disk only.
	m, err := o.BMC.Start(mctx, lab, dir, []Disk{{Path: lab.rootImg, Serial: e2eRootDisk}, {Path: lab.spare, Serial: e2eSpareDisk}},
		logger.With("component", "bmc"))
	if err != nil {
		return nil, err
	}
	lab.cleanup(func() error { _ = m.Close(); return nil })
	lab.m = m
	ok = true
	return lab, nil
}

// bootInterfaces are the lab's enabled boot interfaces: the BMC's, and
// on a UEFI machine with a network boot interface the others too: with
// ipxe, http-ipxe (UEFI HTTP boot of iPXE) and http (UEFI HTTP boot of
// GRUB); with pxe (GRUB, or shim and GRUB signed for secure boot), those
// three, which a secure boot node's validation refuses.
func bootInterfaces(o LabOptions) []string {
	switch {
	case o.Firmware == UEFI && o.BMC.Boot == pxe.NameIPXE:
		return []string{pxe.NameIPXE, pxe.NameHTTPIPXE, pxe.NameHTTP}
	case o.Firmware == UEFI && o.BMC.Boot == pxe.NamePXE:
		return []string{pxe.NamePXE, pxe.NameIPXE, pxe.NameHTTPIPXE, pxe.NameHTTP}
	}
	return []string{o.BMC.Boot}
}

// loadPlugin discovers the plugin executable binary under a plugin host
// of its own (a directory holding only it), registers what it serves
// into reg and checks reg; Close closes the host, stopping the plugin.
func (lab *Lab) loadPlugin(ctx context.Context, binary string, reg *driver.Registry, dir string, tp trace.TracerProvider, pluginEnv []string) error {
	abs, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	pdir := filepath.Join(dir, "plugins")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(abs, filepath.Join(pdir, filepath.Base(abs))); err != nil {
		return err
	}
	// The host's and the plugin's logs are dropped, as plugintest does.
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{pdir}, Logger: slog.New(slog.DiscardHandler),
		TracerProvider: tp, PluginEnv: pluginEnv})
	lab.cleanup(func() error { host.Close(); return nil })
	rep, err := host.Discover(ctx)
	if err != nil {
		return fmt.Errorf("vmlab: discovering %s: %w", binary, err)
	}
	if err := rep.Err(); err != nil || len(rep.Plugins) != 1 {
		return fmt.Errorf("vmlab: discovering %s: %d plugins, skipped: %v", binary, len(rep.Plugins), err)
	}
	if err := host.Register(reg); err != nil {
		return fmt.Errorf("vmlab: registering %s: %w", binary, err)
	}
	if err := reg.Check(); err != nil {
		return fmt.Errorf("vmlab: registry with %s: %w", binary, err)
	}
	return nil
}

// Conductor is the lab's conductor.
func (lab *Lab) Conductor() *conductor.Conductor { return lab.cond }

// Store is the conductor's store.
func (lab *Lab) Store() baremetal.Store { return lab.store }

// Image is the OS image the lab serves.
func (lab *Lab) Image() OSImage { return lab.img }

// Machine is the machine under test.
func (lab *Lab) Machine() LabMachine { return lab.m }

// Console is the machine's serial console, read by the lab.
func (lab *Lab) Console() *Console { return lab.m.serial() }

// Node is the UUID of the node EnrollNode enrolled ("" before).
func (lab *Lab) Node() string { return lab.node }

// Ramdisk is the IPA ramdisk's kernel and initramfs the lab boots.
func (lab *Lab) Ramdisk() IPARamdisk { return lab.rd }

// BMCInfo is the node's driver_info for the lab's BMC.
func (lab *Lab) BMCInfo() map[string]any { return maps.Clone(lab.bmcInfo) }

// ServeIronicAPI serves Ironic's REST API (baremetal/ironicapi, noauth)
// over the lab's conductor on the host's loopback, and returns its URL;
// Close stops it. The agents keep the agent API on the lab's network.
func (lab *Lab) ServeIronicAPI() (string, error) {
	h, err := ironicapi.New(ironicapi.Options{Conductor: lab.cond, Drivers: lab.reg})
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	// The timeline records the writes; the polls would drown them.
	rec := recordRequests(lab.tl, "ironic-api", h)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		rec.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	lab.cleanup(func() error { return srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

// NewNode is the node of the machine to enroll: the BMC's driver and
// driver_info, the direct deploy and agent inspect interfaces, root
// device hints naming the root disk, and instance_info deploying the raw
// image.
func (lab *Lab) NewNode() *baremetal.Node {
	node := &baremetal.Node{
		DeployInterface: agentdeploy.Name, InspectInterface: agentdeploy.InspectName,
		Properties:   map[string]any{"root_device": map[string]any{"serial": e2eRootDisk}},
		InstanceInfo: lab.RawInstanceInfo(lab.img.RawSHA256),
	}
	if lab.firmware == UEFI {
		node.Properties["capabilities"] = "boot_mode:uefi"
		if lab.secureBoot {
			node.Properties["capabilities"] = "boot_mode:uefi,secure_boot:true"
		}
		node.InstanceInfo = lab.UEFIInstanceInfo()
	}
	lab.kind.Node(lab, node)
	return node
}

// EnrollNode enrolls NewNode with a port for the machine's MAC and
// makes it the lab's node.
func (lab *Lab) EnrollNode(ctx context.Context) (*baremetal.Node, error) {
	nd, err := lab.cond.Enroll(ctx, lab.NewNode())
	if err != nil {
		return nil, err
	}
	lab.node = nd.UUID
	if err := lab.store.CreatePort(ctx, &baremetal.Port{NodeUUID: nd.UUID, Address: e2eMAC, PXEEnabled: true}); err != nil {
		return nil, err
	}
	return nd, nil
}

// RawInstanceInfo is the instance_info of a deploy of the raw image with
// the given SHA-256.
func (lab *Lab) RawInstanceInfo(sha256 string) map[string]any {
	return map[string]any{
		"image_source": lab.imageBase() + "/disk.raw", "image_disk_format": "raw",
		"image_os_hash_algo": "sha256", "image_os_hash_value": sha256,
	}
}

// Firmware is the machine's firmware.
func (lab *Lab) Firmware() Firmware { return lab.firmware }

// imageBase is the image server's URL as the machine reaches it.
func (lab *Lab) imageBase() string {
	return "http://" + net.JoinHostPort(cmp.Or(lab.serverHost, ServerIP), e2eImageHTTP)
}

// Family is the address families of the lab's network.
func (lab *Lab) Family() Family { return lab.n.Family() }

// UEFIImage is the UEFI OS image a UEFI lab serves (the secure boot one
// in a secure boot lab).
func (lab *Lab) UEFIImage() UEFIOSImage { return lab.uefiImg }

// SecureBoot reports whether the lab's machine boots with secure boot on.
func (lab *Lab) SecureBoot() bool { return lab.secureBoot }

// UEFIInstanceInfo is the instance_info of a deploy of the UEFI OS image
// (a UEFI lab's; the secure boot one in a secure boot lab).
func (lab *Lab) UEFIInstanceInfo() map[string]any {
	return map[string]any{
		"image_source": lab.imageBase() + lab.uefiPath, "image_disk_format": "raw",
		"image_os_hash_algo": "sha256", "image_os_hash_value": lab.uefiImg.RawSHA256,
	}
}

// PartitionInstanceInfo is the instance_info of a deploy of the
// partition image (LabOptions.PartitionImage): qcow2, with its kernel and
// ramdisk, a 1 GiB root partition.
func (lab *Lab) PartitionInstanceInfo() map[string]any {
	base := lab.imageBase()
	return map[string]any{
		"image_source": base + "/root.qcow2", "image_disk_format": "qcow2", "image_type": "partition",
		"image_os_hash_algo": "sha512", "image_os_hash_value": lab.partImg.QCOW2SHA512,
		"kernel": base + "/vmlinuz", "ramdisk": base + "/initrd", "root_gb": 1,
	}
}

// PartitionImage is the partition image the lab serves, when
// LabOptions.PartitionImage asked for it.
func (lab *Lab) PartitionImage() PartitionImage { return lab.partImg }

// RAIDInstanceInfo is the instance_info of a deploy onto a software RAID
// (LabOptions.SoftwareRAID): the lab firmware's RAID image, qcow2. The
// UEFI one names its root file system (image_rootfs_uuid, Ironic's
// standalone way); the BIOS one does not, so IPA gets the image's disk
// identifier and takes the md device's first partition, Ironic's other
// way (the root file system is that partition).
func (lab *Lab) RAIDInstanceInfo() map[string]any {
	ii := map[string]any{
		"image_source": lab.imageBase() + "/raid-bios.qcow2", "image_disk_format": "qcow2",
		"image_os_hash_algo": "sha256", "image_os_hash_value": lab.raidImg.BIOSSHA256,
	}
	if lab.firmware == UEFI {
		ii["image_source"], ii["image_os_hash_value"] = lab.imageBase()+"/raid-uefi.qcow2", lab.raidImg.UEFISHA256
		ii["image_rootfs_uuid"] = lab.raidImg.RootFSUUID
	}
	return ii
}

// RAIDImage is the software RAID images the lab serves, when
// LabOptions.SoftwareRAID asked for them.
func (lab *Lab) RAIDImage() RAIDOSImage { return lab.raidImg }

// ConfigDrive is a config drive giving the machine LabHostname and a
// user_data whose anvil-marker the OS image prints.
func ConfigDrive(userData string) (json.RawMessage, error) {
	return json.Marshal(map[string]any{
		"meta_data": map[string]any{"hostname": e2eHostname},
		"user_data": "#cloud-config\nanvil-marker: " + userData + "\n",
	})
}

// WaitState waits for the lab's node to reach want and be unlocked.
func (lab *Lab) WaitState(ctx context.Context, want statemachine.State) (*baremetal.Node, error) {
	nd, err := lab.cond.WaitFor(ctx, lab.node, want)
	if err != nil {
		return nd, fmt.Errorf("waiting for %q: %w", want, err)
	}
	for nd.Reservation != "" {
		select {
		case <-ctx.Done():
			return nd, fmt.Errorf("node in %q still locked by %q", want, nd.Reservation)
		case <-time.After(100 * time.Millisecond):
		}
		if nd, err = lab.store.GetNode(ctx, lab.node); err != nil {
			return nil, err
		}
	}
	return nd, nil
}

// OSMarker waits for the OS image's marker printed after since and
// checks it names LabHostname and userData.
func (lab *Lab) OSMarker(ctx context.Context, since time.Time, userData string) (Line, error) {
	line, err := lab.m.serial().WaitForAfter(ctx, since, OSMarkerPrefix)
	if err != nil {
		return line, fmt.Errorf("no OS marker on the console: %w", err)
	}
	if want := OSMarkerPrefix + " hostname=" + e2eHostname + " user-data=" + userData; !strings.Contains(line.Text, want) {
		return line, fmt.Errorf("OS marker %q, want %q", line.Text, want)
	}
	return line, nil
}

// writeAt writes b into the file at off.
func writeAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readAt reads size bytes of the file at off.
func readAt(path string, off, size int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, size)
	_, err = f.ReadAt(b, off)
	return b, err
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// stepKey is what the step tracker compares.
func stepKey(n *baremetal.Node) string {
	s := "state=" + string(n.ProvisionState)
	if st, _ := n.CleanStep["step"].(string); st != "" {
		s += " clean_step=" + fmt.Sprint(n.CleanStep["interface"]) + "." + st
	}
	if st, _ := n.DeployStep["step"].(string); st != "" {
		s += " deploy_step=" + fmt.Sprint(n.DeployStep["interface"]) + "." + st
	}
	if n.PowerState != "" {
		s += " power=" + string(n.PowerState)
	}
	return s
}

// trackSteps is TrackSteps without a callback.
func (lab *Lab) trackSteps(ctx context.Context) { lab.TrackSteps(ctx, nil) }

// TrackSteps records every change of the node's state, step and power
// in the lab's timeline (PhaseReport) until ctx ends, and hands each to
// fn (when not nil) as "state=... clean_step=... power=...".
func (lab *Lab) TrackSteps(ctx context.Context, fn func(at time.Time, change string)) {
	last := ""
	for {
		if nd, err := lab.store.GetNode(ctx, lab.node); err == nil {
			if k := stepKey(nd); k != last {
				lab.tl.add("conductor", k)
				if fn != nil {
					fn(time.Now(), k)
				}
				last = k
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// consoleMarks are console lines worth a time in the phase reports:
// the firmware, the kernel (and whether secure boot is on), the UEFI OS
// image's loader, the ramdisk's /init stages (each with the
// kernel's uptime), the agent's start, inventory and lookup, the OS, and
// the machine powering off or restarting.
var consoleMarks = []string{
	"iPXE initialising devices", "Linux version", SecureBootLine, UEFILoaderLine, "anvil-ipa: init started", "anvil-ipa: devices settled",
	"anvil-ipa: network up", "anvil-ipa: starting ironic-python-agent", "Starting ironic-python-agent version",
	"Collecting full inventory", "Inventory collected in", "anvil-ipa: poweroff", "anvil-ipa: reboot",
	OSDiskLine, OSMarkerPrefix, "reboot: Power down", "reboot: Restarting",
}

// RamdiskStages lists the console's boot milestones (consoleMarks) from
// since on, each with its time after since, one per line: where a
// ramdisk boot spends its time.
func RamdiskStages(c *Console, since time.Time) string {
	var b strings.Builder
	for _, l := range c.Lines() {
		if l.At.Before(since) {
			continue
		}
		for _, mk := range consoleMarks {
			if strings.Contains(l.Text, mk) {
				fmt.Fprintf(&b, "  %+7.1fs  %s\n", l.At.Sub(since).Seconds(), truncate(l.Text, 110))
				break
			}
		}
	}
	return b.String()
}

// PhaseReport is the phase's wall time with the boot stages, requests,
// steps and console milestones between from and to, and the heartbeats
// each step spent.
func (lab *Lab) PhaseReport(name string, from, to time.Time) string {
	events := lab.tl.between(from, to)
	for _, l := range lab.m.serial().Lines() {
		if l.At.Before(from) || l.At.After(to) {
			continue
		}
		for _, mk := range consoleMarks {
			if strings.Contains(l.Text, mk) {
				events = append(events, tlEvent{At: l.At, Source: "console", What: truncate(l.Text, 100)})
				break
			}
		}
	}
	for _, s := range lab.m.Starts() {
		if !s.Before(from) && !s.After(to) {
			events = append(events, tlEvent{At: s, Source: "bmc", What: "QEMU started"})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Before(events[j].At) })
	var b strings.Builder
	heartbeats, sinceStep := 0, 0
	fmt.Fprintf(&b, "phase %s: %.1fs\n", name, to.Sub(from).Seconds())
	for _, e := range events {
		hb := e.Source == "agent-api" && strings.Contains(e.What, "/heartbeat/")
		if hb {
			heartbeats++
			sinceStep++
			continue // counted, not listed
		}
		if e.Source == "conductor" {
			fmt.Fprintf(&b, "  %+8.1fs  %-9s %s (heartbeats since the last change: %d)\n", e.At.Sub(from).Seconds(), e.Source, e.What, sinceStep)
			sinceStep = 0
			continue
		}
		fmt.Fprintf(&b, "  %+8.1fs  %-9s %s\n", e.At.Sub(from).Seconds(), e.Source, e.What)
	}
	fmt.Fprintf(&b, "  phase %s: %.1fs, %d heartbeats", name, to.Sub(from).Seconds(), heartbeats)
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// OutOfBandPowerOffs counts the conductor's log lines saying it powered
// the node off out of band because its agent's soft power off failed,
// was refused or did not end in time.
func (lab *Lab) OutOfBandPowerOffs() int {
	b, err := os.ReadFile(lab.condLog)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("powering off out of band"))
}

// Diagnostics is what explains a failure: the node, the BMC's events,
// the console since the last power on (secrets masked) and the last
// lines of Anvil's log, each on lines of its own after a newline.
func (lab *Lab) Diagnostics() string {
	var b strings.Builder
	if lab.store != nil && lab.node != "" {
		if nd, err := lab.store.GetNode(context.Background(), lab.node); err == nil {
			fmt.Fprintf(&b, "\nnode: %s target %q reserved %q last_error %q", stepKey(nd), nd.TargetProvisionState, nd.Reservation, nd.LastError)
		}
	}
	if lab.m != nil {
		fmt.Fprintf(&b, "\nBMC events: %v", lab.m.Events())
		start := lab.began
		if s := lab.m.Starts(); len(s) > 0 {
			start = s[len(s)-1]
		}
		// IPA logs its request lines, agent_token included.
		fmt.Fprintf(&b, "\nconsole since the last power on (last 80 lines):\n%s", baremetal.MaskText(lab.m.serial().Transcript(start, 80)))
	}
	if log, err := os.ReadFile(lab.condLog); err == nil {
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		fmt.Fprintf(&b, "\nAnvil log (last 60 lines):\n%s", strings.Join(lines, "\n"))
	}
	return b.String()
}
