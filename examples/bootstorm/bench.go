package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anvilmetal/anvil/internal/procstat"
)

// skipError says the machine cannot run the benchmark (not root, a tool
// missing): the smoke test skips on it.
type skipError struct{ why string }

func (e *skipError) Error() string { return "cannot run here: " + e.why }

type benchOptions struct {
	counts []int
	// repeat runs the servers this many times per N, in alternating
	// order (A B C, C B A, ...), so that a machine whose load drifts
	// favours none of them; ratios are of the servers' means.
	repeat      int
	kernelSize  int64
	ramdiskSize int64
	spread      time.Duration
	servers     []string
	timeout     time.Duration
	log         *slog.Logger
}

// ServerRun is one server's storm.
type ServerRun struct {
	Server string       `json:"server"`
	Storm  *stormResult `json:"storm"`
	// ServerCPUSec is the server processes' CPU time over the storm;
	// ServerCores is that over the storm's wall time.
	ServerCPUSec float64 `json:"server_cpu_s"`
	ServerCores  float64 `json:"server_cores"`
	// ServerRSSMiB is the peak resident set summed over the server's
	// processes (Anvil: one; dnsmasq with nginx: dnsmasq, nginx's master
	// and workers).
	ServerRSSMiB float64 `json:"server_peak_rss_mib"`
	Processes    int     `json:"server_processes"`
	WallSec      float64 `json:"wall_s"`
	// BacklogDrops is how many packets the host's input queues dropped
	// during the storm (/proc/net/softnet_stat, every CPU, every
	// namespace): a veth delivers through them, and a DHCP broadcast
	// dropped there is lost whatever the server does.
	BacklogDrops int64 `json:"host_backlog_drops"`
	// ServerUDP and ClientUDP are the UDP counters of the server's and
	// the machines' namespaces over the storm (/proc/net/snmp):
	// RcvbufErrors are datagrams dropped because a socket's buffer was
	// full, on the server side the DHCP and TFTP requests it never saw.
	ServerUDP map[string]int64 `json:"server_ns_udp"`
	// Uptime is the machine's load when the storm ended.
	Uptime    string           `json:"uptime"`
	ClientUDP map[string]int64 `json:"client_ns_udp"`
}

// Report is one N's storms and Anvil's ratios to the baseline.
type Report struct {
	Machines   int         `json:"machines"`
	Network    string      `json:"network"`
	KernelMiB  int64       `json:"kernel_mib"`
	RamdiskMiB int64       `json:"ramdisk_mib"`
	SpreadSec  float64     `json:"spread_s"`
	Runs       []ServerRun `json:"runs"`
	// Means are each server's figures averaged over its runs.
	Means       map[string]map[string]float64 `json:"means"`
	Ratios      map[string]map[string]float64 `json:"anvil_over_baseline,omitempty"`
	LoadBefore  string                        `json:"uptime_before"`
	LoadAfter   string                        `json:"uptime_after"`
	GOMAXPROCS  string                        `json:"anvil_gomaxprocs"`
	Description string                        `json:"description"`
}

// network is a storm's addressing.
type network struct {
	prefix    netip.Prefix
	server    netip.Addr
	poolStart netip.Addr
	poolEnd   netip.Addr
}

func networkFor(n int) network {
	if n <= 200 {
		return network{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParseAddr("192.0.2.1"),
			netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.250")}
	}
	return network{netip.MustParsePrefix("198.18.0.0/21"), netip.MustParseAddr("198.18.0.1"),
		netip.MustParseAddr("198.18.0.10"), netip.MustParseAddr("198.18.7.250")}
}

func parseNetwork(s string) (network, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return network{}, err
	}
	for _, n := range []int{1, 1000} {
		if nw := networkFor(n); nw.prefix == p {
			return nw, nil
		}
	}
	return network{}, fmt.Errorf("network %s is not one bootstorm uses", s)
}

const (
	serverIf = "bss0"
	clientIf = "bsc0"
)

func uptime() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "uptime: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

func checkTools(servers []string) error {
	if os.Geteuid() != 0 {
		return &skipError{"network namespaces need root"}
	}
	need := []string{"ip"}
	for _, s := range servers {
		if strings.HasPrefix(s, "dnsmasq") {
			need = append(need, "dnsmasq", "nginx")
		}
	}
	for _, t := range need {
		if _, err := exec.LookPath(t); err != nil {
			return &skipError{t + " not installed (Debian iproute2, dnsmasq-base, nginx-light)"}
		}
	}
	for _, f := range []string{"undionly.kpxe", "snponly.efi"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/ipxe", f)); err != nil {
			return &skipError{"/usr/lib/ipxe/" + f + " missing (Debian ipxe)"}
		}
	}
	return nil
}

// bench runs every storm and hands each N's report to emit.
func bench(ctx context.Context, o benchOptions, emit func(Report) error) error {
	if err := checkTools(o.servers); err != nil {
		return err
	}
	for _, s := range o.servers {
		if s != "anvil" && s != "dnsmasq" && s != "dnsmasq-noping" {
			return fmt.Errorf("-servers: unknown server %q (anvil, dnsmasq, dnsmasq-noping)", s)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "bootstorm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// dnsmasq and nginx's workers drop root: they read what is here.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	if err := writeImages(root, o.kernelSize, o.ramdiskSize); err != nil {
		return err
	}
	for _, n := range o.counts {
		nw := networkFor(n)
		rep := Report{Machines: n, Network: nw.prefix.String(), KernelMiB: o.kernelSize >> 20,
			RamdiskMiB: o.ramdiskSize >> 20, SpreadSec: o.spread.Seconds(), LoadBefore: uptime(),
			GOMAXPROCS: os.Getenv("GOMAXPROCS"),
			Description: "half BIOS PXE (undionly.kpxe), half UEFI PXE (snponly.efi); DHCP, NBP over TFTP, " +
				"iPXE DHCP, script, kernel and ramdisk over HTTP"}
		order := slices.Clone(o.servers)
		for range max(o.repeat, 1) {
			for _, s := range order {
				run, err := storm(ctx, o, self, root, s, n, nw)
				if err != nil {
					return fmt.Errorf("%s, %d machines: %w", s, n, err)
				}
				rep.Runs = append(rep.Runs, run)
			}
			slices.Reverse(order)
		}
		rep.LoadAfter = uptime()
		rep.Means = means(rep.Runs)
		// Anvil's mean figures over each baseline's.
		if a, ok := rep.Means["anvil"]; ok {
			ratio := func(x, y float64) float64 {
				if y == 0 {
					return 0
				}
				return float64(int(x/y*1000+0.5)) / 1000
			}
			rep.Ratios = map[string]map[string]float64{}
			for name, b := range rep.Means {
				if name == "anvil" {
					continue
				}
				rep.Ratios[name] = map[string]float64{}
				for k, v := range a {
					rep.Ratios[name][k] = ratio(v, b[k])
				}
			}
		}
		if err := emit(rep); err != nil {
			return err
		}
	}
	return nil
}

// writeImages writes the kernel and ramdisk every machine downloads
// (random bytes: nothing on the way compresses them), and copies the
// boot programs to the TFTP root.
func writeImages(root string, kernel, ramdisk int64) error {
	for _, d := range []string{"images", "tftp", "http/pxelinux.cfg"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	rnd := mrand.NewChaCha8(seed)
	for _, f := range []struct {
		name string
		size int64
	}{{"deploy_kernel", kernel}, {"deploy_ramdisk", ramdisk}} {
		w, err := os.Create(filepath.Join(root, "images", f.name))
		if err != nil {
			return err
		}
		_, err = io.CopyN(w, rnd, f.size)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	for _, f := range []string{"undionly.kpxe", "snponly.efi"} {
		b, err := os.ReadFile(filepath.Join("/usr/lib/ipxe", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, "tftp", f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func ipRun(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newNamespaces makes the server and client namespaces joined by a veth
// pair, with the server's address; the returned function deletes them.
func newNamespaces(nw network) (srv, cli string, del func(), err error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	srv, cli = "anvil-bs-"+id+"-s", "anvil-bs-"+id+"-c"
	var made []string
	del = func() {
		for _, ns := range made {
			_ = ipRun("netns", "del", ns)
		}
	}
	for _, ns := range []string{srv, cli} {
		if err := ipRun("netns", "add", ns); err != nil {
			del()
			return "", "", nil, err
		}
		made = append(made, ns)
	}
	steps := [][]string{
		{"-n", srv, "link", "set", "lo", "up"},
		{"-n", cli, "link", "set", "lo", "up"},
		{"-n", srv, "link", "add", serverIf, "type", "veth", "peer", "name", clientIf, "netns", cli},
		{"-n", srv, "addr", "add", netip.PrefixFrom(nw.server, nw.prefix.Bits()).String(), "dev", serverIf},
		{"-n", srv, "link", "set", serverIf, "up"},
		{"-n", cli, "link", "set", clientIf, "up"},
		{"-n", cli, "route", "add", nw.prefix.String(), "dev", clientIf},
	}
	for _, s := range steps {
		if err := ipRun(s...); err != nil {
			del()
			return "", "", nil, err
		}
	}
	return srv, cli, del, nil
}

// daemon is a server process started in a namespace.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
}

// startDaemon starts argv in ns (ip netns exec execs it, so the PID is
// the daemon's), with its output in a log file under dir.
func startDaemon(ns, dir, name string, env []string, argv ...string) (*daemon, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return &daemon{name: name, cmd: cmd, log: logf}, nil
}

// stop ends the daemon by its PID: SIGTERM, then SIGKILL after 10 s.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.log.Close()
}

// waitFor waits until the daemon's log has a line containing s, or a
// file exists, for up to 30 s.
func (d *daemon) waitFor(ctx context.Context, line, file string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if d.cmd.ProcessState != nil {
			break
		}
		if file != "" {
			if _, err := os.Stat(file); err == nil {
				return nil
			}
		}
		if line != "" {
			if b, err := os.ReadFile(d.log.Name()); err == nil && bytes.Contains(b, []byte(line)) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(d.log.Name())
	return fmt.Errorf("%s did not start: %s", d.name, tail(b, 600))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// tree is the daemons' PIDs and their descendants.
func tree(roots []int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil {
			children[st.PPID] = append(children[st.PPID], pid)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		out = append(out, p)
		for _, c := range children[p] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

// cpuOf reads every process's CPU time by PID.
func cpuOf(pids []int) map[int]time.Duration {
	m := map[int]time.Duration{}
	for _, p := range pids {
		if st, err := procstat.Read(p); err == nil {
			m[p] = st.CPU
		}
	}
	return m
}

// storm runs one server's storm of n machines in fresh namespaces.
func storm(ctx context.Context, o benchOptions, self, root, server string, n int, nw network) (ServerRun, error) {
	run := ServerRun{Server: server}
	switch server {
	case "dnsmasq":
		run.Server = "dnsmasq+nginx"
	case "dnsmasq-noping":
		run.Server = "dnsmasq --no-ping+nginx"
	}
	srvNS, cliNS, del, err := newNamespaces(nw)
	if err != nil {
		return run, err
	}
	defer del()
	dir, err := os.MkdirTemp(root, server+"-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		return run, err
	}
	var daemons []*daemon
	defer func() {
		for _, d := range daemons {
			d.stop()
		}
	}()
	switch server {
	case "anvil":
		d, err := startDaemon(srvNS, dir, "anvil", nil, self, "-role", "anvil", "-iface", serverIf,
			"-dir", root, "-subnet", nw.prefix.String(), "-count", strconv.Itoa(n),
			"-kernel-mib", strconv.FormatInt(o.kernelSize>>20, 10), "-ramdisk-mib", strconv.FormatInt(o.ramdiskSize>>20, 10))
		if err != nil {
			return run, err
		}
		daemons = append(daemons, d)
		if err := d.waitFor(ctx, "bootstorm: anvil ready", ""); err != nil {
			return run, err
		}
	case "dnsmasq", "dnsmasq-noping":
		if err := startBaseline(ctx, srvNS, root, dir, n, nw, server == "dnsmasq-noping", &daemons); err != nil {
			return run, err
		}
	}
	roots := make([]int, len(daemons))
	for i, d := range daemons {
		roots[i] = d.cmd.Process.Pid
	}
	before := cpuOf(tree(roots))
	drops0 := backlogDrops()
	srvUDP0, cliUDP0 := udpCounters(srvNS), udpCounters(cliNS)

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cliNS, self, "-role", "clients", "-iface", clientIf,
		"-count", strconv.Itoa(n), "-subnet", nw.prefix.String(), "-spread", o.spread.String(), "-server-ns", srvNS,
		"-kernel-mib", strconv.FormatInt(o.kernelSize>>20, 10), "-ramdisk-mib", strconv.FormatInt(o.ramdiskSize>>20, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	o.log.Info("bootstorm: storm", "server", run.Server, "machines", n)
	if err := cmd.Run(); err != nil {
		return run, fmt.Errorf("clients: %v: %s", err, tail(stderr.Bytes(), 800))
	}
	run.WallSec = time.Since(began).Seconds()
	run.BacklogDrops = backlogDrops() - drops0
	run.ServerUDP, run.ClientUDP = udpCounters(srvNS), udpCounters(cliNS)
	run.Uptime = uptime()
	for k, v := range srvUDP0 {
		run.ServerUDP[k] -= v
	}
	for k, v := range cliUDP0 {
		run.ClientUDP[k] -= v
	}
	var res stormResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return run, fmt.Errorf("clients printed %q: %w", tail(stdout.Bytes(), 300), err)
	}
	run.Storm = &res

	pids := tree(roots)
	after := cpuOf(pids)
	var cpu time.Duration
	for p, c := range after {
		cpu += c - before[p] // a process born during the storm counts whole
	}
	for _, p := range pids {
		if rss, err := procstat.PeakRSSMiB(p); err == nil {
			run.ServerRSSMiB += rss
		}
	}
	run.Processes = len(after)
	run.ServerCPUSec = cpu.Seconds()
	if res.AllDoneSec > 0 {
		run.ServerCores = run.ServerCPUSec / run.WallSec
	}
	for _, d := range daemons {
		if d.cmd.ProcessState != nil {
			return run, fmt.Errorf("%s exited during the storm", d.name)
		}
	}
	o.log.Info("bootstorm: storm done", "server", run.Server, "machines", n, "all_s", res.AllDoneSec,
		"failed", res.Failed, "server_cpu_s", run.ServerCPUSec)
	return run, nil
}

// startBaseline starts dnsmasq (DHCP and TFTP, configured as Ironic's
// dnsmasq.conf example does for iPXE) and nginx serving the scripts and
// images as Ironic lays them out: boot.ipxe chaining to
// pxelinux.cfg/<mac>, each naming the deploy kernel and ramdisk.
func startBaseline(ctx context.Context, ns, root, dir string, n int, nw network, noPing bool, daemons *[]*daemon) error {
	base := "http://" + nw.server.String() + ":8080"
	httpRoot := filepath.Join(dir, "http")
	if err := os.MkdirAll(filepath.Join(httpRoot, "pxelinux.cfg"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(root, "images"), filepath.Join(httpRoot, "images")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(httpRoot, "boot.ipxe"), []byte("#!ipxe\n"+
		"chain "+base+"/pxelinux.cfg/${mac:hexhyp} || goto error_no_config\n"+
		":error_no_config\necho No configuration for ${mac}\nexit\n"), 0o644); err != nil {
		return err
	}
	for i := range n {
		mac := macFor(i)
		script := "#!ipxe\n:deploy\nimgfree\n" +
			"kernel " + base + "/images/deploy_kernel ipa-api-url=http://" + nw.server.String() + ":6385 BOOTIF=" + mac.String() +
			" initrd=deploy_ramdisk || goto retry\n" +
			"initrd --name deploy_ramdisk " + base + "/images/deploy_ramdisk || goto retry\nboot\n" +
			":retry\nsleep 10\ngoto deploy\n"
		if err := os.WriteFile(filepath.Join(httpRoot, "pxelinux.cfg", hyphenMAC(mac)), []byte(script), 0o644); err != nil {
			return err
		}
	}
	mask := netip.MustParseAddr("255.255.255.0")
	if nw.prefix.Bits() == 21 {
		mask = netip.MustParseAddr("255.255.248.0")
	}
	args := []string{"dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		"--port=0", "--interface=" + serverIf, "--bind-interfaces", "--log-facility=-",
		"--pid-file=" + filepath.Join(dir, "dnsmasq.pid"), "--dhcp-leasefile=" + filepath.Join(dir, "dnsmasq.leases"),
		"--dhcp-range=" + nw.poolStart.String() + "," + nw.poolEnd.String() + "," + mask.String() + ",1h",
		"--dhcp-lease-max=" + strconv.Itoa(4*n+100), "--quiet-dhcp", "--quiet-tftp",
		"--enable-tftp", "--tftp-root=" + filepath.Join(root, "tftp"),
		"--dhcp-userclass=set:ipxe,iPXE", "--dhcp-match=set:ipxe,175",
		"--dhcp-match=set:efi64,option:client-arch,7",
		"--dhcp-boot=tag:!ipxe,tag:!efi64,undionly.kpxe",
		"--dhcp-boot=tag:!ipxe,tag:efi64,snponly.efi",
		"--dhcp-boot=tag:ipxe," + base + "/boot.ipxe"}
	if noPing {
		args = append(args, "--no-ping")
	}
	dm, err := startDaemon(ns, dir, "dnsmasq", nil, args...)
	if err != nil {
		return err
	}
	*daemons = append(*daemons, dm)
	if err := dm.waitFor(ctx, "started, version", ""); err != nil {
		return err
	}
	conf := filepath.Join(dir, "nginx.conf")
	pid := filepath.Join(dir, "nginx.pid")
	if err := os.WriteFile(conf, []byte(`daemon off;
user root;
worker_processes auto;
pid `+pid+`;
error_log `+filepath.Join(dir, "nginx-error.log")+`;
events { worker_connections 8192; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_timeout 65;
	default_type application/octet-stream;
	client_body_temp_path `+dir+`/nginx-body;
	proxy_temp_path `+dir+`/nginx-proxy;
	fastcgi_temp_path `+dir+`/nginx-fastcgi;
	uwsgi_temp_path `+dir+`/nginx-uwsgi;
	scgi_temp_path `+dir+`/nginx-scgi;
	server {
		listen `+nw.server.String()+`:8080 backlog=4096;
		root `+httpRoot+`;
	}
}
`), 0o644); err != nil {
		return err
	}
	ng, err := startDaemon(ns, dir, "nginx", nil, "nginx", "-e", filepath.Join(dir, "nginx-error.log"), "-p", dir, "-c", conf)
	if err != nil {
		return err
	}
	*daemons = append(*daemons, ng)
	if err := ng.waitFor(ctx, "", pid); err != nil {
		return err
	}
	return nil
}

// backlogDrops sums the second column of /proc/net/softnet_stat: packets
// dropped because a CPU's input backlog was full.
func backlogDrops() int64 {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0
	}
	var sum int64
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 1 {
			if v, err := strconv.ParseInt(f[1], 16, 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// udpCounters reads the UDP counters that say where datagrams were lost
// from a namespace's /proc/net/snmp.
func udpCounters(ns string) map[string]int64 {
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	m := map[string]int64{}
	if err != nil {
		return m
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, v := range f[1:] {
			if i >= len(names) {
				break
			}
			switch names[i] {
			case "InDatagrams", "NoPorts", "InErrors", "RcvbufErrors", "SndbufErrors":
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					m[names[i]] = n
				}
			}
		}
	}
	return m
}

// means averages each server's headline figures over its runs.
func means(runs []ServerRun) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	count := map[string]int{}
	for _, r := range runs {
		m := out[r.Server]
		if m == nil {
			m = map[string]float64{}
			out[r.Server] = m
		}
		count[r.Server]++
		m["time_until_all_ramdisks_s"] += r.Storm.AllDoneSec
		m["p50_s"] += r.Storm.P50Sec
		m["bytes_per_s"] += r.Storm.BytesPerSec
		m["dhcp_answers_lost"] += float64(r.Storm.DHCPLost)
		m["failed"] += float64(r.Storm.Failed)
		m["retries"] += float64(r.Storm.Retries)
		m["server_cpu_s"] += r.ServerCPUSec
		m["server_peak_rss_mib"] += r.ServerRSSMiB
	}
	for name, m := range out {
		for k := range m {
			m[k] /= float64(count[name])
		}
	}
	return out
}
