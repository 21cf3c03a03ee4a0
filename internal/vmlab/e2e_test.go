package vmlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
	"github.com/anvilmetal/anvil/statemachine"
)

// EnvVME2E un-skips the end-to-end provisioning test of a virtual machine
// (set it to 1, with ANVIL_TEST_QEMU=1 and ANVIL_TEST_IPA_TARBALL).
const EnvVME2E = "ANVIL_TEST_VM_E2E"

// The lab's fixed addresses on the provisioning network (the bridge).
const (
	e2eBootHTTP  = "8080" // netboot's HTTP (iPXE scripts, kernel, ramdisk)
	e2eImageHTTP = "8081" // the image server IPA downloads from
	e2eAgentAPI  = "6385" // the conductor's agent API
	e2eMAC       = "52:54:00:e2:e0:01"
	e2eRootDisk  = "anvil-root"
	e2eSpareDisk = "anvil-spare"
	e2eHostname  = "anvil-vm-e2e"
	// e2eHeartbeatTimeout is [api]ramdisk_heartbeat_timeout given to the
	// agent at lookup: IPA heartbeats every 30 to 60 % of it.
	e2eHeartbeatTimeout = 30 * time.Second
)

// ipmiPlugin is the real plugins/ipmi executable.
var ipmiPlugin = &plugintest.Plugin{Package: "github.com/anvilmetal/anvil/plugins/ipmi", Name: "ipmi"}

// TestVMProvisionIPMI provisions one QEMU virtual machine (TCG) as bare
// metal through the conductor's public API, with the real components
// end to end: the ipmi hardware type served by the plugins/ipmi
// executable (ipmitool) against Debian's ipmi_sim acting as the VM's BMC
// (BMCMachine), the ipxe boot interface writing to Anvil's boot server
// (DHCP, iPXE script, kernel and ramdisk over HTTP on the lab bridge),
// the direct deploy interface and agent inspection with the stock IPA
// 2023.1 ramdisk, and the whole-disk OS image. Phases: enroll and manage;
// inspect (the real inventory gives cpus, memory_mb, local_gb, cpu_arch
// and the port); provide (automated cleaning, erase_devices disabled by
// priority override, IPA's erase_devices_metadata zeroes the disk's first
// MiB); deploy the raw image with root device hints and a config drive
// (the OS prints the config drive's hostname on the console); undeploy
// (cleaning again: the partition table is gone); the same deploy and
// undeploy again with the agent's commands waited on
// (AgentSettings.PollCommands), the first pair having moved on the
// agent's heartbeats only, as Ironic does; a deploy with a wrong
// checksum fails with IPA's error and recovers with undeploy; the qcow2
// image deploys. Fast track keeps the agent up from inspection to the
// first deploy, and from the undeploy's cleaning on. It logs the wall
// time of every phase, the boot stages and steps inside it, and the
// agent heartbeats each step waited for.
func TestVMProvisionIPMI(t *testing.T) {
	if os.Getenv(EnvVME2E) != "1" {
		t.Skip(EnvVME2E + "=1 not set: VM end-to-end provisioning test skipped")
	}
	tarball := os.Getenv(IPATarballEnv)
	if tarball == "" {
		t.Skip(IPATarballEnv + " not set: VM end-to-end provisioning test skipped")
	}
	for _, b := range []string{IPMISimBinary, "ipmitool"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skip(b + " not installed (Debian packages openipmi, ipmitool): VM end-to-end provisioning test skipped")
		}
	}
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	lab := startE2ELab(t, n, tarball, ipmiBMC())
	lab.run(t)
}

// labMachine is the machine under test, whatever its BMC.
type labMachine interface {
	Powered() bool
	Starts() []time.Time
	Events() []string
	Close() error
	serial() *Console
}

func (m *BMCMachine) serial() *Console     { return m.Console }
func (m *RedfishMachine) serial() *Console { return m.Console }

// e2eBMC is what differs between the end-to-end tests of two kinds of
// BMC: the hardware type, its plugin and interfaces, the machine, the
// node's fields, and the phases beyond the common ones.
type e2eBMC struct {
	hardwareType  string
	plugin        *plugintest.Plugin
	boot, console string
	// prepare runs before the plugin is loaded (its environment) and the
	// machine starts; may be nil.
	prepare func(t *testing.T, lab *e2eLab, rd IPARamdisk, dir string)
	start   func(ctx context.Context, lab *e2eLab, dir string, disks []Disk, logger *slog.Logger) (labMachine, error)
	// node fills the node's driver, interfaces and driver_info.
	node func(lab *e2eLab, nd *baremetal.Node)
	// sol: read the OS marker through the console interface too; full:
	// also the deploy and undeploy with PollCommands, the failing deploy
	// and the qcow2 deploy.
	sol, full bool
}

// ipmiBMC is ipmi_sim with the ipmi hardware type, ipxe boot and the
// ipmitool-socat console.
func ipmiBMC() e2eBMC {
	return e2eBMC{
		hardwareType: ipmitool.HardwareType, plugin: ipmiPlugin, boot: pxe.NameIPXE, console: ipmisol.Name, sol: true, full: true,
		start: func(ctx context.Context, lab *e2eLab, dir string, disks []Disk, logger *slog.Logger) (labMachine, error) {
			m, err := StartBMCMachine(ctx, lab.n, BMCMachineOptions{
				Name: "vm-ipmi", MAC: e2eMAC, MemoryMB: 1024, CPUs: 1, Dir: dir, Password: "vm-bmc-pw-1", Disks: disks, Logger: logger,
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
		node: func(lab *e2eLab, nd *baremetal.Node) {
			nd.Name, nd.Driver = "vm-ipmi-0", ipmitool.HardwareType
			nd.BootInterface, nd.ConsoleInterface = pxe.NameIPXE, ipmisol.Name
			nd.DriverInfo = lab.bmcInfo
		},
	}
}

// e2eLab is everything the test runs: the machine, the boot server, the
// image server, the conductor and what they recorded.
type e2eLab struct {
	n         *Network
	bmc       e2eBMC
	m         labMachine
	bmcInfo   map[string]any // the node's driver_info for the BMC
	deployISO string         // the IPA ISO, for virtual media
	cond      *conductor.Conductor
	store     baremetal.Store
	img       OSImage
	rootImg   string // the root disk's file
	spare     string
	condLog   string
	tl        *timeline
	began     time.Time
	node      string
}

// timeline keeps what happened, from every source, with its time.
type timeline struct {
	mu     sync.Mutex
	events []tlEvent
}

type tlEvent struct {
	At           time.Time
	Source, What string
}

func (tl *timeline) add(source, what string) {
	tl.mu.Lock()
	tl.events = append(tl.events, tlEvent{time.Now(), source, what})
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
		tl.add(source, fmt.Sprintf("%s %s → %d", r.Method, r.URL.Path, sw.code))
	})
}

// listenIn opens a TCP listener inside the lab's namespace.
func listenIn(t *testing.T, n *Network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ln
}

// sparseFile makes a sparse file of size bytes.
func sparseFile(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func startE2ELab(t *testing.T, n *Network, tarball string, bmc e2eBMC) *e2eLab {
	t.Helper()
	lab := &e2eLab{n: n, bmc: bmc, tl: &timeline{}, began: time.Now()}
	ctx := context.Background()
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 30*time.Minute)
	defer bcancel()
	rd, err := BuildIPARamdisk(bctx, cache, tarball)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	lab.img, err = BuildOSImage(bctx, cache)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "vme2e-") // short: Unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if bmc.prepare != nil {
		bmc.prepare(t, lab, rd, dir)
	}
	t.Logf("phase images: %.1fs (IPA ramdisk built now: %v, OS image built now: %v)", time.Since(lab.began).Seconds(), rd.Built, lab.img.Built)
	serverIP := n.ServerAddr().String()

	// The disks: vda the root disk the hints name (6 GiB), holding an
	// old installation (the OS image) that cleaning must erase; vdb a
	// blank spare (5 GiB), which IPA would pick without the hints (the
	// smallest disk of at least 4 GiB).
	lab.spare, lab.rootImg = filepath.Join(dir, "spare.raw"), filepath.Join(dir, "root.raw")
	sparseFile(t, lab.spare, 5<<30)
	raw, err := os.ReadFile(lab.img.Raw)
	if err != nil {
		t.Fatal(err)
	}
	sparseFile(t, lab.rootImg, 6<<30)
	if err := writeAt(lab.rootImg, raw, 0); err != nil {
		t.Fatal(err)
	}

	// The image server.
	images := http.NewServeMux()
	for name, path := range map[string]string{"/disk.raw": lab.img.Raw, "/disk.qcow2": lab.img.QCOW2} {
		images.HandleFunc("GET "+name, func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, path) })
	}
	imgLn := listenIn(t, n, net.JoinHostPort(serverIP, e2eImageHTTP))
	imgSrv := &http.Server{Handler: recordRequests(lab.tl, "images", images), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = imgSrv.Serve(imgLn) }()
	t.Cleanup(func() { imgSrv.Close() })

	// The boot server.
	logFile := filepath.Join(dir, "anvil.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	lab.condLog = logFile
	logger := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	resolver := &lateResolver{}
	observe := stage.ObserverFunc(func(r stage.Record) {
		lab.tl.add("netboot", r.Phrase())
		if c := resolver.c.Load(); c != nil {
			c.ObserveBootStage(r)
		}
	})
	srv, err := netboot.New(netboot.Options{
		HTTPBase: "http://" + net.JoinHostPort(serverIP, e2eBootHTTP), TFTPServer: n.ServerAddr(),
		Resolver: resolver, Observer: observe, Logger: logger.With("component", "netboot"),
	})
	if err != nil {
		var mf *netboot.MissingFileError
		if errors.As(err, &mf) {
			t.Skip(err.Error())
		}
		t.Fatal(err)
	}
	var listeners *netboot.Listeners
	if err := n.Do(func() error {
		var err error
		listeners, err = srv.Listen(netboot.ListenOptions{
			TFTPAddr: net.JoinHostPort(serverIP, "69"),
			HTTPAddr: net.JoinHostPort(serverIP, e2eBootHTTP),
			TFTP: &tftp.Server{ListenTransfer: func(local netip.Addr) (c *net.UDPConn, err error) {
				err = n.Do(func() error {
					c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
					return err
				})
				return c, err
			}},
			DHCP: &dhcp.Options{Mode: dhcp.Authoritative, Interface: BridgeName, ServerIP: n.ServerAddr(),
				Subnet: n.Prefix(), PoolStart: netip.MustParseAddr(PoolStart), PoolEnd: netip.MustParseAddr(PoolEnd)},
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- listeners.Serve(sctx) }()
	t.Cleanup(func() {
		scancel()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("the boot server did not stop within 10 s")
		}
	})

	// The drivers: the real BMC plugin, the network boot interfaces over
	// the boot server, the direct deploy and agent inspect interfaces.
	client, err := agentclient.NewClient(agentclient.ClientConfig{
		CommandTimeout: 60 * time.Second, Logger: logger.With("component", "agentclient"),
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
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{bmc.hardwareType},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindBoot:    {bmc.boot},
			driver.KindDeploy:  {agentdeploy.Name},
			driver.KindInspect: {agentdeploy.InspectName, driver.NoInspect},
			driver.KindConsole: {bmc.console, driver.NoConsole},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	boot := pxe.New(srv, pxe.Options{
		DefaultBootMode: netboot.BIOS, DeployKernel: rd.Kernel.Path, DeployRamdisk: rd.Initramfs,
		// rootfstype=ramfs: the 1 GiB machine's tmpfs root (half its
		// memory) would truncate the unpacked initramfs.
		KernelAppendParams: "console=ttyS0,115200 rootfstype=ramfs ipa-debug=1",
	})
	if err := reg.Register(boot.Bundle()); err != nil {
		t.Fatal(err)
	}
	// The serial console over IPMI SOL (ipmitool sol activate, served on
	// 127.0.0.1 by the console manager).
	cm := console.NewManager(console.Options{Logger: logger.With("component", "console")})
	t.Cleanup(func() { cm.Close() })
	if bmc.console == ipmisol.Name {
		if err := reg.Register(ipmisol.New(cm, ipmisol.Options{Logger: logger.With("component", "ipmisol")}).Bundle()); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	inspect, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{Logger: logger.With("component", "inspect")})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, inspect); err != nil {
		t.Fatal(err)
	}
	plugintest.Load(t, bmc.plugin.Path(t), plugintest.Options{Registry: reg})

	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lab.store = store
	apiURL := "http://" + net.JoinHostPort(serverIP, e2eAgentAPI)
	cond, err := conductor.New(store, reg, conductor.Options{
		Hostname: "vmlab-conductor", Logger: logger.With("component", "conductor"),
		Agent: conductor.AgentSettings{Client: client, APIURL: apiURL, FastTrack: true},
		// Ironic's [deploy]erase_devices_priority = 0: shredding a disk
		// under TCG takes far too long; erase_devices_metadata (IPA's
		// priority 99) stays.
		CleanStepPriorityOverride: map[string]int{"deploy.erase_devices": 0},
		// Under TCG on a loaded machine the agent starts minutes after
		// its ramdisk's download (five, at load 20).
		BootStageDeadlines: stage.Deadlines{Agent: 20 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := agentclient.NewHandler(cond.AgentBackend(), agentclient.HandlerConfig{
		HeartbeatTimeout: e2eHeartbeatTimeout, Logger: logger.With("component", "agentapi")})
	if err != nil {
		t.Fatal(err)
	}
	apiLn := listenIn(t, n, net.JoinHostPort(serverIP, e2eAgentAPI))
	api := agentclient.NewServer(recordRequests(lab.tl, "agent-api", h), agentclient.ServerConfig{})
	go func() { _ = api.Serve(apiLn) }()
	t.Cleanup(func() { api.Close() })
	if err := cond.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cond.Stop(sctx)
	})
	resolver.c.Store(cond)
	lab.cond = cond

	mctx, mcancel := context.WithTimeout(ctx, 10*time.Minute) // the VM slot may be busy
	defer mcancel()
	// The root disk first: SeaBIOS boots the first disk only.
	m, err := bmc.start(mctx, lab, dir, []Disk{{Path: lab.rootImg, Serial: e2eRootDisk}, {Path: lab.spare, Serial: e2eSpareDisk}},
		logger.With("component", "bmc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	lab.m = m
	return lab
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

// trackSteps records every change of the node's state, step and power
// in the timeline until ctx ends.
func (lab *e2eLab) trackSteps(ctx context.Context) {
	last := ""
	for {
		if nd, err := lab.store.GetNode(ctx, lab.node); err == nil {
			if k := stepKey(nd); k != last {
				lab.tl.add("conductor", k)
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

// consoleMarks are console lines worth a time in the phase reports.
var consoleMarks = []string{
	"iPXE initialising devices", "Linux version", "anvil-ipa: init started", "anvil-ipa: network up",
	"anvil-ipa: starting ironic-python-agent", OSDiskLine, OSMarkerPrefix, "reboot: Power down", "reboot: Restarting",
}

// report logs the phase's wall time, the boot stages, requests, steps
// and console milestones inside it, and the heartbeats each step spent.
func (lab *e2eLab) report(t *testing.T, name string, from time.Time) time.Duration {
	t.Helper()
	to := time.Now()
	events := lab.tl.between(from, to)
	for _, l := range lab.m.serial().Lines() {
		if l.At.Before(from) || l.At.After(to) {
			continue
		}
		for _, mk := range consoleMarks {
			if strings.Contains(l.Text, mk) {
				events = append(events, tlEvent{l.At, "console", truncate(l.Text, 100)})
				break
			}
		}
	}
	for _, s := range lab.m.Starts() {
		if !s.Before(from) && !s.After(to) {
			events = append(events, tlEvent{s, "bmc", "QEMU started"})
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
	t.Log(b.String())
	return to.Sub(from)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// fail ends the test with the node, the BMC's events, the console's and
// the conductor log's last lines.
func (lab *e2eLab) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	if nd, err := lab.store.GetNode(context.Background(), lab.node); err == nil {
		fmt.Fprintf(&b, "\nnode: %s target %q reserved %q last_error %q", stepKey(nd), nd.TargetProvisionState, nd.Reservation, nd.LastError)
	}
	fmt.Fprintf(&b, "\nBMC events: %v", lab.m.Events())
	start := lab.began
	if s := lab.m.Starts(); len(s) > 0 {
		start = s[len(s)-1]
	}
	// IPA logs its request lines, agent_token included.
	fmt.Fprintf(&b, "\nconsole since the last power on (last 80 lines):\n%s", baremetal.MaskText(lab.m.serial().Transcript(start, 80)))
	if log, err := os.ReadFile(lab.condLog); err == nil {
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		fmt.Fprintf(&b, "\nAnvil log (last 60 lines):\n%s", strings.Join(lines, "\n"))
	}
	t.Fatal(b.String())
}

// waitState waits for the node to reach want and be unlocked.
func (lab *e2eLab) waitState(t *testing.T, want statemachine.State, timeout time.Duration) *baremetal.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nd, err := lab.cond.WaitFor(ctx, lab.node, want)
	if err != nil {
		lab.fail(t, "waiting for %q: %v", want, err)
	}
	for nd.Reservation != "" {
		select {
		case <-ctx.Done():
			lab.fail(t, "node in %q still locked by %q", want, nd.Reservation)
		case <-time.After(100 * time.Millisecond):
		}
		if nd, err = lab.store.GetNode(ctx, lab.node); err != nil {
			t.Fatal(err)
		}
	}
	return nd
}

// osMarker waits for the OS image's marker printed after since.
func (lab *e2eLab) osMarker(t *testing.T, since time.Time, userData string, timeout time.Duration) Line {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	line, err := lab.m.serial().WaitForAfter(ctx, since, OSMarkerPrefix)
	if err != nil {
		lab.fail(t, "no OS marker on the console: %v", err)
	}
	if want := OSMarkerPrefix + " hostname=" + e2eHostname + " user-data=" + userData; !strings.Contains(line.Text, want) {
		lab.fail(t, "OS marker %q, want %q", line.Text, want)
	}
	return line
}

func configDrive(t *testing.T, userData string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"meta_data": map[string]any{"hostname": e2eHostname},
		"user_data": "#cloud-config\nanvil-marker: " + userData + "\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawInstanceInfo is the instance_info of a deploy of the raw image with
// the given SHA-256.
func (lab *e2eLab) rawInstanceInfo(sha256 string) map[string]any {
	return map[string]any{
		"image_source": "http://" + net.JoinHostPort(ServerIP, e2eImageHTTP) + "/disk.raw", "image_disk_format": "raw",
		"image_os_hash_algo": "sha256", "image_os_hash_value": sha256,
	}
}

func (lab *e2eLab) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var total []string
	phase := func(name string, from time.Time) {
		total = append(total, fmt.Sprintf("%s %.1fs", name, lab.report(t, name, from).Seconds()))
	}
	defer func() {
		t.Logf("phases: %s; whole test %.1fs", strings.Join(total, ", "), time.Since(lab.began).Seconds())
	}()

	// 1. Enroll and manage: verification reads the power state through
	// the plugin from the BMC (ipmitool from ipmi_sim; Redfish).
	start := time.Now()
	node := &baremetal.Node{
		DeployInterface: agentdeploy.Name, InspectInterface: agentdeploy.InspectName,
		Properties:   map[string]any{"root_device": map[string]any{"serial": e2eRootDisk}},
		InstanceInfo: lab.rawInstanceInfo(lab.img.RawSHA256),
	}
	lab.bmc.node(lab, node)
	nd, err := lab.cond.Enroll(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	lab.node = nd.UUID
	go lab.trackSteps(ctx)
	if err := lab.store.CreatePort(ctx, &baremetal.Port{NodeUUID: nd.UUID, Address: e2eMAC, PXEEnabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Manage(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 2*time.Minute)
	if nd.PowerState != driver.PowerOff || lab.m.Powered() {
		lab.fail(t, "verification recorded power %q (QEMU running: %v); the machine is off", nd.PowerState, lab.m.Powered())
	}
	phase("manage", start)

	// 2. Inspect in band: the ramdisk boots over the network and posts
	// the real inventory.
	start = time.Now()
	if err := lab.cond.Inspect(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 25*time.Minute)
	props := map[string]string{}
	for _, k := range []string{"cpus", "memory_mb", "local_gb", "cpu_arch"} {
		props[k] = fmt.Sprint(nd.Properties[k])
	}
	// local_gb: the 6 GiB disk the hints name, less Ironic's 1 GiB.
	want := map[string]string{"cpus": "1", "memory_mb": "1024", "local_gb": "5", "cpu_arch": "x86_64"}
	if fmt.Sprint(props) != fmt.Sprint(want) {
		lab.fail(t, "inspected properties %v, want %v", props, want)
	}
	ports, err := lab.store.ListPorts(ctx, nd.UUID)
	if err != nil {
		t.Fatal(err)
	}
	var macs []string
	for _, p := range ports {
		macs = append(macs, p.Address)
	}
	if !slices.Equal(macs, []string{e2eMAC}) {
		lab.fail(t, "ports %v after inspection, want the VM's %s", macs, e2eMAC)
	}
	if inv, err := lab.cond.NodeInventory(ctx, nd.UUID); err != nil || inv == nil {
		lab.fail(t, "no stored inventory: %v", err)
	}
	t.Logf("inspected: %v, ports %v, power %s (fast track keeps the agent up: %v)", props, macs, nd.PowerState, lab.m.Powered())
	phase("inspect", start)

	// 3. Provide: automated cleaning by the running agent (fast track).
	start = time.Now()
	if err := lab.cond.Provide(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	lab.checkErased(t, "after provide")
	lab.checkStepsRan(t, start, "clean_step=deploy.erase_devices_metadata")
	phase("provide", start)

	// 4. Deploy the raw image with a config drive; the machine reboots
	// into it and prints the config drive's hostname. The conductor
	// moves on the agent's heartbeats only, as Ironic does.
	start = time.Now()
	deployRaw := func(userData string) {
		if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, userData)}); err != nil {
			t.Fatal(err)
		}
		nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
		marker := lab.osMarker(t, start, userData, 10*time.Minute)
		t.Logf("active (power %s); OS marker %.1fs after the deploy began: %q", nd.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
		lab.checkImageWritten(t)
	}
	deployRaw("e2e-raw")
	phase("deploy-raw (heartbeats)", start)
	if lab.bmc.sol {
		// Timed apart, so that the two raw deploys compare.
		start = time.Now()
		lab.markerThroughSOL(t, "e2e-raw")
		phase("console (SOL)", start)
	}

	// 5. Undeploy: cleaning (the ramdisk boots again) erases the disk.
	undeploy := func() {
		if err := lab.cond.Undeploy(ctx, nd.UUID); err != nil {
			t.Fatal(err)
		}
		nd = lab.waitState(t, statemachine.Available, 25*time.Minute)
		lab.checkErased(t, "after undeploy")
	}
	start = time.Now()
	undeploy()
	phase("undeploy (heartbeats)", start)
	if !lab.bmc.full {
		return
	}

	// The same deploy and undeploy with the agent's commands waited on
	// (AgentSettings.PollCommands): each in-band step continues when the
	// agent finishes it instead of at its next heartbeat. The rest of
	// the test keeps it on.
	lab.cond.SetPollCommands(true)
	start = time.Now()
	// The undeploy emptied instance_info: the image again.
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.rawInstanceInfo(lab.img.RawSHA256)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deployRaw("e2e-raw-polled")
	phase("deploy-raw (polling)", start)
	start = time.Now()
	undeploy()
	phase("undeploy (polling)", start)

	// 6. A wrong checksum: the agent refuses the image; the deploy fails
	// with its error, the node unlocked; undeploy recovers it.
	start = time.Now()
	// The undeploy emptied instance_info: the image again, with a wrong
	// SHA-256.
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.rawInstanceInfo(strings.Repeat("0", 64))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-bad")}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Minute)
	nd, err = lab.cond.WaitFor(wctx, nd.UUID, statemachine.Active)
	wcancel()
	if !errors.Is(err, conductor.ErrNodeFailed) || nd == nil || nd.ProvisionState != statemachine.DeployFailed {
		lab.fail(t, "deploy with a wrong checksum: %v, want deploy failed", err)
	}
	nd = lab.waitState(t, statemachine.DeployFailed, time.Minute)
	if !strings.Contains(strings.ToLower(nd.LastError), "checksum") {
		lab.fail(t, "last_error %q does not carry the agent's checksum error", nd.LastError)
	}
	t.Logf("deploy failed as it should: last_error %q", nd.LastError)
	if err := lab.cond.Undeploy(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	phase("bad-checksum", start)

	// 7. The qcow2 image (IPA converts it with qemu-img).
	start = time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = map[string]any{
			"image_source": "http://" + net.JoinHostPort(ServerIP, e2eImageHTTP) + "/disk.qcow2", "image_disk_format": "qcow2",
			"image_os_hash_algo": "sha512", "image_os_hash_value": lab.img.QCOW2SHA512,
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-qcow2")}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
	marker := lab.osMarker(t, start, "e2e-qcow2", 10*time.Minute)
	t.Logf("qcow2 active (power %s); OS marker %.1fs after the deploy began", nd.PowerState, marker.At.Sub(start).Seconds())
	lab.checkImageWritten(t)
	phase("deploy-qcow2", start)
}

// checkErased checks that the root disk's first MiB is zero (no
// partition table, no boot code) and the spare disk untouched, read from
// the disk files (QEMU writes through the host's page cache; the agent
// writes with direct I/O).
func (lab *e2eLab) checkErased(t *testing.T, when string) {
	t.Helper()
	b, err := readAt(lab.rootImg, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(b) {
		i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 })
		lab.fail(t, "%s: the root disk's first MiB is not zeroed (first non-zero byte at %d; MBR signature %x)", when, i, b[510:512])
	}
}

// checkImageWritten compares the root disk with the image beyond its
// partition table (IPA adds the config drive partition to it) and checks
// the spare disk was left alone.
func (lab *e2eLab) checkImageWritten(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(lab.img.Raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAt(lab.rootImg, 1<<20, int64(len(raw))-(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw[1<<20:]) {
		lab.fail(t, "the root disk does not hold the image's partition")
	}
	if b, _ := readAt(lab.rootImg, 510, 2); !bytes.Equal(b, []byte{0x55, 0xaa}) {
		lab.fail(t, "the root disk has no MBR signature after the deploy: %x", b)
	}
	spare, err := readAt(lab.spare, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(spare) {
		lab.fail(t, "the spare disk (no hint names it) was written")
	}
}

// checkStepsRan checks that the timeline saw each step since from.
func (lab *e2eLab) checkStepsRan(t *testing.T, from time.Time, steps ...string) {
	t.Helper()
	for _, s := range steps {
		found := false
		for _, e := range lab.tl.between(from, time.Now()) {
			found = found || e.Source == "conductor" && strings.Contains(e.What, s)
		}
		if !found {
			lab.fail(t, "the conductor never ran %s", s)
		}
	}
}

// markerThroughSOL enables the node's console (ipmitool-socat: the
// conductor's console interface runs "ipmitool sol activate" against
// ipmi_sim, whose SOL device carries the VM's serial port) and reads the
// OS marker, which the OS prints every 10 s, from the console's TCP
// address; then disables the console.
func (lab *e2eLab) markerThroughSOL(t *testing.T, userData string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	if err := lab.cond.SetConsoleMode(ctx, lab.node, true); err != nil {
		lab.fail(t, "enabling the console: %v", err)
	}
	defer func() {
		if err := lab.cond.SetConsoleMode(context.Background(), lab.node, false); err != nil {
			t.Errorf("disabling the console: %v", err)
		}
	}()
	var addr string
	for addr == "" {
		st, err := lab.cond.ConsoleInfo(ctx, lab.node)
		if err == nil && st.Info != nil {
			addr = strings.TrimPrefix(st.Info.URL, "tcp://")
			break
		}
		select {
		case <-ctx.Done():
			lab.fail(t, "the console never started: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		lab.fail(t, "console %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	want := OSMarkerPrefix + " hostname=" + e2eHostname + " user-data=" + userData
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(want)) {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if len(got) > 1<<20 {
			got = got[len(got)-(1<<19):]
		}
		if err != nil {
			lab.fail(t, "reading the SOL console at %s: %v; read %q", addr, err, truncate(string(got), 2000))
		}
	}
	t.Logf("marker read through IPMI SOL (the ipmitool-socat console at %s) %.1fs after enabling the console", addr, time.Since(began).Seconds())
}
