// Command scalebench measures how many nodes one Anvil conductor serves:
// N nodes behind the fake driver served by a real plugin process (the
// plugins/fake binary, built by the program and loaded through
// driver/plugin), each with a simulated BMC whose every power and
// management call takes a latency inside the plugin process (100 ms
// IPMI-like for half the fleet, 20 ms Redfish-like for the other half;
// one BMC per node serving one call at a time, as a rack server's BMC
// does). Power state sync runs at Ironic's default interval (120 s,
// [conductor]sync_power_state_interval) with Ironic's worker limit (8,
// min(sync_power_state_workers, periodic_max_workers)), while a share of
// the fleet (10 %) deploys and cleans without pause, driven by simulated
// Ironic Python Agents that look up, heartbeat at IPA's pace and answer
// commands over real HTTPS; the rest of the fleet is steady (half
// active, half available).
//
// It prints one JSON object: every power sync run's wall time and whether
// it ended within its interval, the conductor process's CPU in cores (its
// CPU time over the measured window's wall time), the plugin process's
// CPU, peak resident memory of both, the heartbeat handling p99 (the
// agent API's handler time) and the verb latency p99 (Deploy and
// Undeploy until accepted), and whether all of these hold with the
// conductor under one core.
//
// The simulated agents and the loop driving the verbs run inside the
// conductor's process (the agents' CPU is counted in the conductor's:
// the figure is an upper bound); the plugin's CPU is counted apart. Each
// agent has a loopback address of its own (127.1.x.y: Linux routes all
// of 127/8 to lo), its own TLS server and certificate, and calls the API
// from that address, so the conductor keeps a connection per agent as
// with real machines.
//
// The steady nodes and the busy nodes' starting point (available) are
// written to the store directly, so setting up 10,000 nodes takes seconds;
// the conductor then serves them as any other. The measured window starts
// with the first power sync run, one interval after the conductor starts
// (the busy nodes' first deploys are spread over that interval), and ends
// when -runs (3) sync runs have finished: two intervals and a run, about
// 7 minutes from start at the default interval, plus setup.
//
// Usage:
//
//	go run ./examples/scalebench -nodes 10000 [-db postgres://...] [-interval 120s] [-runs 2]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/internal/fleetwait"
	"github.com/anvilmetal/anvil/internal/procstat"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/prometheus/client_golang/prometheus"
)

type config struct {
	nodes          int
	db             string
	interval       time.Duration
	runs           int
	busyShare      float64
	ipmiLatency    time.Duration
	redfishLatency time.Duration
	redfishShare   float64
	bmcConcurrency int
	syncWorkers    int
	workers        int
	// noHealth turns the conductor's health monitoring off (Ironic's
	// [conductor]enable_health_monitoring = false); by default every
	// power sync also reads each node's health from its BMC.
	noHealth bool
	// maxConcurrent is the deploy and clean limit; 0 means the busy
	// share, so the cycle is never refused.
	maxConcurrent int
	// heartbeatInterval fixes the agents' heartbeat interval; 0 means
	// IPA's pace.
	heartbeatInterval time.Duration
	// fastAgents paces the agents for tests (heartbeats every 200 ms,
	// retries after 50 ms) instead of IPA's pace.
	fastAgents bool
	pluginBin  string
	timeout    time.Duration
	// logger receives the conductor's, the plugin host's and the agents'
	// logs; nil discards them.
	logger *slog.Logger
}

// The image every deploy writes.
const (
	imageSource   = "http://images.example.com/img.qcow2"
	imageChecksum = "0123456789abcdef0123456789abcdef"
)

// Run is one power sync run.
type Run struct {
	WallSec     float64 `json:"wall_s"`
	WithinSched bool    `json:"within_interval"`
	// Unfinished marks the run still going when -timeout ended the
	// window; WallSec is how long it had run.
	Unfinished bool `json:"unfinished,omitempty"`
}

// Latency summarises a latency distribution in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	Maxms float64 `json:"max_ms"`
}

// Report is the JSON scalebench prints.
type Report struct {
	Nodes       int     `json:"nodes"`
	BusyNodes   int     `json:"busy_nodes"`
	Database    string  `json:"database"`
	IntervalSec float64 `json:"sync_interval_s"`
	SyncWorkers int     `json:"sync_workers"`
	// HealthMonitoring says each power sync also reads every node's
	// health (Ironic's enable_health_monitoring, on by default): a second
	// call to the node's BMC.
	HealthMonitoring bool `json:"health_monitoring"`
	// SyncBMCCalls is how many calls to its BMC the sync makes per node:
	// the power state, and the health with health monitoring.
	SyncBMCCalls   int     `json:"sync_bmc_calls_per_node"`
	Workers        int     `json:"workers"`
	MaxConcurrent  int     `json:"max_concurrent_deploy_clean"`
	IPMILatencyMs  float64 `json:"ipmi_latency_ms"`
	IPMINodes      int     `json:"ipmi_nodes"`
	RedfishLatency float64 `json:"redfish_latency_ms"`
	RedfishNodes   int     `json:"redfish_nodes"`
	BMC            string  `json:"bmc"`
	Heartbeats     string  `json:"agent_heartbeats"`
	GoMaxProcs     int     `json:"gomaxprocs"`
	SetupSec       float64 `json:"setup_s"`

	WindowSec     float64 `json:"window_s"`
	SyncRuns      []Run   `json:"sync_runs"`
	AllRunsInTime bool    `json:"all_sync_runs_within_interval"`
	// TimedOut says -timeout ended the window before -runs runs finished.
	TimedOut bool `json:"timed_out"`
	// SyncBoundSec is the shortest a sync run can be: the steady nodes'
	// BMC latencies times the BMC calls per node, over the sync workers
	// (the busy nodes are mostly skipped, being reserved or waiting for
	// their agent).
	SyncBoundSec    float64 `json:"sync_bmc_bound_s"`
	ConductorCPU    float64 `json:"conductor_cpu_cores"`
	ConductorCounts string  `json:"conductor_cpu_counts"`
	PluginCPU       float64 `json:"plugin_cpu_cores"`
	// ConductorCPUWait and PluginCPUWait are how long each process's
	// threads waited, runnable, for a CPU in the window (Linux
	// schedstat): time the machine's other processes took from them. A
	// starved process shows it here; an idle one does not.
	ConductorCPUWait float64 `json:"conductor_cpu_wait_s"`
	PluginCPUWait    float64 `json:"plugin_cpu_wait_s"`
	// SchedLatency is how long the conductor process's goroutines waited,
	// runnable, to run (runtime/metrics /sched/latencies in the window):
	// its one P busy with other goroutines, or its thread off the CPU.
	SchedLatency Latency `json:"goroutine_sched_latency"`
	PeakRSSMiB   float64 `json:"conductor_peak_rss_mib"`
	PluginRSSMiB float64 `json:"plugin_peak_rss_mib"`
	Heartbeat    Latency `json:"heartbeat_handling"`
	// Verbs are the client's calls until accepted or refused: Update
	// (instance_info), Deploy, Undeploy.
	Verbs   Latency `json:"verb_latency"`
	Deploys int     `json:"deploys_done"`
	Cleans  int     `json:"cleans_done"`
	// LockedRetries counts verbs refused with ErrNodeLocked and retried
	// a second later (each attempt is one verb_latency sample).
	LockedRetries int                `json:"locked_retries"`
	Failures      int                `json:"failures"`
	FirstFailure  string             `json:"first_failure,omitempty"`
	PowerSync     map[string]float64 `json:"power_sync_outcomes"`
	// Holds says every sync run ended within its interval, the conductor
	// used under one core, and no node failed.
	Holds bool `json:"holds"`
}

func main() {
	var cfg config
	nodes := flag.String("nodes", "1000", "number of nodes, or a comma-separated list of fleet sizes run one after the other (1000,3000,10000)")
	flag.StringVar(&cfg.db, "db", "", "SQLite file path or PostgreSQL DSN (postgres://postgres@127.0.0.1:5432/test?sslmode=disable); default: a SQLite file in a temporary directory")
	flag.DurationVar(&cfg.interval, "interval", conductor.DefaultSyncPowerStateInterval, "power sync interval (Ironic's default 120s; shorter for quick runs)")
	flag.IntVar(&cfg.runs, "runs", 3, "power sync runs in the measured window (which spans runs-1 intervals and the last run)")
	flag.Float64Var(&cfg.busyShare, "busy", 0.10, "share of the fleet deploying and cleaning at any moment")
	flag.DurationVar(&cfg.ipmiLatency, "ipmi-latency", 100*time.Millisecond, "simulated BMC latency per call of IPMI-like nodes")
	flag.DurationVar(&cfg.redfishLatency, "redfish-latency", 20*time.Millisecond, "simulated BMC latency per call of Redfish-like nodes")
	flag.Float64Var(&cfg.redfishShare, "redfish-share", 0.5, "share of the fleet with Redfish-like BMCs")
	flag.IntVar(&cfg.bmcConcurrency, "bmc-concurrency", 1, "calls each node's BMC serves at once")
	flag.IntVar(&cfg.syncWorkers, "sync-workers", conductor.DefaultPeriodicMaxWorkers, "power sync workers (Ironic: min(sync_power_state_workers, periodic_max_workers) = 8)")
	flag.IntVar(&cfg.workers, "workers", conductor.DefaultWorkers, "conductor worker pool size")
	health := flag.Bool("health-monitoring", true, "read every node's health on each power sync (Ironic's enable_health_monitoring, default true): a second BMC call per node")
	flag.IntVar(&cfg.maxConcurrent, "max-concurrent", 0, "max_concurrent_deploy and max_concurrent_clean (0: the busy node count, so the cycle is never refused)")
	flag.DurationVar(&cfg.heartbeatInterval, "heartbeat-interval", 0, "fixed agent heartbeat interval (0: IPA's pace, heartbeat_timeout × random(0.3, 0.6))")
	flag.BoolVar(&cfg.fastAgents, "fast-agents", false, "pace the agents fast (200 ms heartbeats, 50 ms retries) instead of IPA's pace, for quick runs")
	flag.StringVar(&cfg.pluginBin, "plugin", "", "a built plugins/fake binary; default: build one into a temporary directory")
	flag.DurationVar(&cfg.timeout, "timeout", 0, "give up after this long (0: setup plus interval × (runs + 3))")
	verbose := flag.Bool("v", false, "log the conductor, the plugin host and the agents to stderr")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured window to this file")
	flag.Parse()
	cfg.noHealth = !*health
	if *verbose {
		cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	var prof *os.File
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fatal(err)
		}
		prof = f
	}
	var sizes []int
	for _, f := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-nodes: %q is not a fleet size", f))
		}
		sizes = append(sizes, n)
	}
	if prof != nil && len(sizes) > 1 {
		fatal(errors.New("-cpuprofile needs a single fleet size"))
	}
	var reports []*Report
	for _, n := range sizes {
		c := cfg
		c.nodes = n
		rep, err := run(context.Background(), c, prof)
		if err != nil {
			fatal(fmt.Errorf("%d nodes: %w", n, err))
		}
		reports = append(reports, rep)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(summarize(reports)); err != nil {
		fatal(err)
	}
}

// Summary is what scalebench prints: one report per fleet size.
type Summary struct {
	Results []*Report `json:"results"`
	// LargestHolding is the largest fleet size whose report holds (every
	// sync run within its interval, the conductor under one core, no
	// failure), 0 when none does.
	LargestHolding int `json:"largest_nodes_holding"`
}

func summarize(reports []*Report) Summary {
	s := Summary{Results: reports}
	for _, r := range reports {
		if r.Holds {
			s.LargestHolding = max(s.LargestHolding, r.Nodes)
		}
	}
	return s
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "scalebench:", err)
	os.Exit(1)
}

func (cfg *config) check() error {
	switch {
	case cfg.nodes < 1:
		return errors.New("-nodes must be at least 1")
	case cfg.runs < 1:
		return errors.New("-runs must be at least 1")
	case cfg.interval <= 0:
		return errors.New("-interval must be positive")
	case cfg.busyShare < 0 || cfg.busyShare > 1, cfg.redfishShare < 0 || cfg.redfishShare > 1:
		return errors.New("-busy and -redfish-share must be between 0 and 1")
	case cfg.ipmiLatency < 0 || cfg.ipmiLatency > fake.MaxBMCLatency, cfg.redfishLatency < 0 || cfg.redfishLatency > fake.MaxBMCLatency:
		return fmt.Errorf("-ipmi-latency and -redfish-latency must be between 0 and %s", fake.MaxBMCLatency)
	case cfg.bmcConcurrency < 1 || cfg.bmcConcurrency > fake.MaxBMCConcurrency:
		return fmt.Errorf("-bmc-concurrency must be between 1 and %d", fake.MaxBMCConcurrency)
	case cfg.syncWorkers < 1 || cfg.workers < 1:
		return errors.New("-sync-workers and -workers must be at least 1")
	}
	return nil
}

// syncBMCCalls is how many calls to its BMC the power sync makes per
// node: it reads the power state and, with health monitoring, the health
// (the fake management interface reads it from the simulated BMC, as the
// redfish and ipmitool ones read it from the real one).
func (cfg *config) syncBMCCalls() int {
	if cfg.noHealth {
		return 1
	}
	return 2
}

// syncBound is the shortest a power sync run can be when the steady
// nodes' BMC latencies add up to bmcTime: every call of every node, over
// the sync workers.
func (cfg *config) syncBound(bmcTime time.Duration) time.Duration {
	return bmcTime * time.Duration(cfg.syncBMCCalls()) / time.Duration(cfg.syncWorkers)
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// latencies collects durations, bounded: past maxSamples it keeps a
// uniform sample (reservoir), so a long run cannot grow it without end.
type latencies struct {
	mu    sync.Mutex
	n     int
	max   time.Duration
	d     []time.Duration
	rnd   *rand.Rand
	limit int
}

func newLatencies() *latencies {
	return &latencies{rnd: rand.New(rand.NewPCG(1, 2)), limit: 200000}
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	l.max = max(l.max, d)
	if len(l.d) < l.limit {
		l.d = append(l.d, d)
		return
	}
	if i := l.rnd.IntN(l.n); i < l.limit {
		l.d[i] = d
	}
}

func (l *latencies) reset() {
	l.mu.Lock()
	l.n, l.max, l.d = 0, 0, l.d[:0]
	l.mu.Unlock()
}

func (l *latencies) summary() Latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return Latency{}
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := min(len(s)-1, int(p*float64(len(s))))
		return round(float64(s[i]) / 1e6)
	}
	return Latency{Count: l.n, P50ms: q(0.50), P99ms: q(0.99), Maxms: round(float64(l.max) / 1e6)}
}

// buildPlugin builds plugins/fake into dir under the name the host looks
// for.
func buildPlugin(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, plugin.ExecutablePrefix+"fake")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/anvilmetal/anvil/plugins/fake")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building plugins/fake: %w", err)
	}
	return out, nil
}

func run(ctx context.Context, cfg config, prof *os.File) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	setupStart := time.Now()
	busy := int(float64(cfg.nodes)*cfg.busyShare + 0.5)
	maxConc := cfg.maxConcurrent
	if maxConc <= 0 {
		maxConc = max(busy, 1)
	}
	rep := &Report{Nodes: cfg.nodes, BusyNodes: busy, IntervalSec: cfg.interval.Seconds(), SyncWorkers: cfg.syncWorkers,
		HealthMonitoring: !cfg.noHealth, SyncBMCCalls: cfg.syncBMCCalls(),
		Workers: cfg.workers, MaxConcurrent: maxConc, IPMILatencyMs: float64(cfg.ipmiLatency) / 1e6,
		RedfishLatency: float64(cfg.redfishLatency) / 1e6, GoMaxProcs: runtime.GOMAXPROCS(0),
		BMC:             fmt.Sprintf("one simulated BMC per node serving %d call(s) at a time, inside the plugin process", cfg.bmcConcurrency),
		Heartbeats:      "IPA's pace: heartbeat_timeout (300 s) × random(0.3, 0.6), forced after a command at most every 5 s, over HTTPS",
		ConductorCounts: "the conductor process: conductor, store, agent API over HTTPS, and the simulated agents and verb loop (in-process); not the plugin process",
	}
	if cfg.fastAgents {
		rep.Heartbeats = "fast (not IPA's pace): every 200 ms, retries after 50 ms, over HTTPS"
	} else if cfg.heartbeatInterval > 0 {
		rep.Heartbeats = fmt.Sprintf("every %s, forced after a command at most every 5 s, over HTTPS", cfg.heartbeatInterval)
	}
	tmp, err := os.MkdirTemp("", "anvil-scalebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	// The store.
	var store *sqlstore.Store
	if strings.HasPrefix(cfg.db, "postgres://") || strings.HasPrefix(cfg.db, "postgresql://") {
		store, err = sqlstore.OpenPostgres(ctx, cfg.db, sqlstore.Options{})
		rep.Database = "postgresql"
	} else {
		path := cfg.db
		if path == "" {
			path = filepath.Join(tmp, "anvil.db")
		}
		store, err = sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
		rep.Database = "sqlite file (WAL, synchronous=NORMAL)"
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()

	// The fake driver, as a plugin process.
	bin := cfg.pluginBin
	if bin == "" {
		if bin, err = buildPlugin(ctx, tmp); err != nil {
			return nil, err
		}
	}
	quiet := cfg.logger
	if quiet == nil {
		quiet = slog.New(slog.DiscardHandler)
	}
	host := plugin.NewHost(plugin.HostConfig{Logger: quiet})
	defer host.Close()
	plug, err := host.Load(ctx, bin)
	if err != nil {
		return nil, err
	}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {fake.Name, agentdeploy.Name},
			driver.KindPower:  {fake.Name, simfleet.PowerName},
		}})
	if err := host.Register(reg); err != nil {
		return nil, err
	}
	impl, ok := reg.Interface(driver.KindPower, fake.Name)
	pluginPower, isPower := impl.(driver.PowerInterface)
	if !ok || !isPower {
		return nil, errors.New("the fake plugin registered no power interface")
	}

	// The agent API over HTTPS, and the simulated agents.
	cert, certPEM, err := agenttest.SelfSignedCert(time.Now(), net.IPv4(127, 0, 0, 1))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(certPEM))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	srv := agentclient.NewServer(nil, agentclient.ServerConfig{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	defer srv.Close()
	ccfg := agentclient.ClientConfig{CommandTimeout: 60 * time.Second}
	if cfg.fastAgents {
		// Polled commands (image.install_bootloader, which a whole-disk
		// deploy in the default UEFI boot mode runs) are checked at the
		// fast agents' pace, not every 6 s as Ironic checks IPA's.
		ccfg.CommandWaitInterval = 200 * time.Millisecond
	}
	client, err := agentclient.NewClient(ccfg)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	agentHTTP := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 256}}
	// Each agent has an address of its own (127.1.x.y), a TLS server and
	// certificate of its own, and calls the API from its address: the
	// conductor handshakes once per agent boot and keeps its connections,
	// as with a real fleet, rather than handshaking for most commands to
	// one shared host and port.
	fleet, err := simfleet.New(simfleet.Config{APIURL: "https://" + ln.Addr().String(), HTTPClient: agentHTTP, OwnAddresses: true,
		IPAPace: !cfg.fastAgents, HeartbeatInterval: cfg.heartbeatInterval, Logger: cfg.logger})
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		return nil, err
	}
	if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.PowerOver(pluginPower)); err != nil {
		return nil, err
	}

	// The fleet, written to the store in its starting states. A conductor
	// group of the run's own keeps nodes of earlier runs on a shared
	// database out of this conductor's way.
	runID := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
	group := "scalebench-" + runID
	redfish := int(float64(cfg.nodes)*cfg.redfishShare + 0.5)
	rep.RedfishNodes, rep.IPMINodes = redfish, cfg.nodes-redfish
	busyUUIDs := make([]string, 0, busy)
	var batch []*baremetal.Node
	var bmcTime time.Duration
	for i := range cfg.nodes {
		lat := cfg.ipmiLatency
		// Spread the two kinds of BMC over the busy and the steady nodes
		// alike.
		if countRedfish(i, cfg.nodes, redfish) {
			lat = cfg.redfishLatency
		}
		n := &baremetal.Node{Name: fmt.Sprintf("scale-%s-%06d", runID, i), Driver: builtin.FakeHardware, ConductorGroup: group,
			DriverInfo:   map[string]any{fake.BMCLatencyKey: lat.String(), fake.BMCConcurrencyKey: float64(cfg.bmcConcurrency)},
			InstanceInfo: map[string]any{"image_source": imageSource, "image_checksum": imageChecksum},
		}
		n.PowerInterface, n.DeployInterface = fake.Name, fake.Name
		switch {
		case i < busy:
			n.PowerInterface, n.DeployInterface = simfleet.PowerName, agentdeploy.Name
			n.ProvisionState, n.PowerState = statemachine.Available, statemachine.PowerOff
		case i%2 == 0:
			n.ProvisionState, n.PowerState = statemachine.Active, statemachine.PowerOn
		default:
			n.ProvisionState, n.PowerState = statemachine.Available, statemachine.PowerOff
		}
		ifs, err := reg.FillDefaults(driver.NodeInterfaces{Node: n.Name, HardwareType: n.Driver,
			Interfaces: map[driver.Kind]string{driver.KindPower: n.PowerInterface, driver.KindDeploy: n.DeployInterface}})
		if err != nil {
			return nil, err
		}
		n.SetInterfaces(ifs)
		if i >= busy {
			bmcTime += lat
		}
		batch = append(batch, n)
		if len(batch) == 500 || i == cfg.nodes-1 {
			if err := store.CreateNodes(ctx, batch); err != nil {
				return nil, err
			}
			for _, b := range batch {
				if b.DeployInterface == agentdeploy.Name {
					busyUUIDs = append(busyUUIDs, b.UUID)
				}
			}
			batch = batch[:0]
		}
	}

	cond, err := conductor.New(store, reg, conductor.Options{
		Agent:    conductor.AgentSettings{Client: client},
		Hostname: "scalebench-" + runID, ConductorGroup: group, Workers: cfg.workers, Logger: quiet,
		SyncPowerStateInterval: cfg.interval, PeriodicMaxWorkers: cfg.syncWorkers, DisableHealthMonitoring: cfg.noHealth,
		MaxConcurrentDeploy: maxConc, MaxConcurrentClean: maxConc,
		WatchBuffer: max(conductor.DefaultWatchBuffer, 16*busy),
	})
	if err != nil {
		return nil, err
	}
	metrics := prometheus.NewRegistry()
	if err := metrics.Register(cond.Metrics()); err != nil {
		return nil, err
	}
	heartbeats := newLatencies()
	agentHandler, err := agentclient.NewHandler(cond.AgentBackend(), agentclient.HandlerConfig{Logger: quiet})
	if err != nil {
		return nil, err
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/heartbeat/") {
			agentHandler.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		agentHandler.ServeHTTP(w, r)
		heartbeats.add(time.Since(start))
	})
	go srv.ServeTLS(ln, "", "") // ends when srv.Close runs
	rep.SetupSec = round(time.Since(setupStart).Seconds())
	rep.SyncBoundSec = round(cfg.syncBound(bmcTime).Seconds())

	timeout := cfg.timeout
	if timeout <= 0 {
		timeout = time.Duration(cfg.runs+3) * cfg.interval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	launched := time.Now()
	if err := cond.Launch(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		cond.Stop(sctx)
	}()

	// The busy nodes cycle deploy → active → undeploy → available, each
	// starting at a random moment of the first interval.
	cyc := &cycler{cond: cond, verbs: newLatencies(), w: fleetwait.New(cond)}
	defer cyc.w.Close()
	cctx, stopCycling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, u := range busyUUIDs {
		delay := time.Duration(rnd.Int64N(int64(cfg.interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			cyc.loop(cctx, u, delay)
		}()
	}
	defer func() {
		stopCycling()
		wg.Wait()
	}()

	// The window opens with the first sync run, one interval after start.
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("timed out before the first power sync run")
	case <-time.After(time.Until(launched.Add(cfg.interval))):
	}
	if prof != nil {
		if err := pprof.StartCPUProfile(prof); err != nil {
			return nil, err
		}
	}
	pluginPID := plug.Status().PID
	winStart, cpu0 := time.Now(), procstat.SelfCPU().Seconds()
	pst0, _ := procstat.Read(pluginPID)
	pcpu0 := pst0.CPU.Seconds()
	wait0, _ := procstat.CPUWait(os.Getpid())
	pwait0, _ := procstat.CPUWait(pluginPID)
	sched0 := schedLatencies()
	heartbeats.reset()
	cyc.verbs.reset()
	cyc.resetCounts()

	var lastCount uint64
	var lastSum float64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	// The first run starts as the window opens; each next one an
	// interval after the previous one ended.
	nextStart := winStart
	for len(rep.SyncRuns) < cfg.runs && !rep.TimedOut {
		select {
		case <-ctx.Done():
			// The run in progress is reported as far as it got.
			d := time.Since(nextStart).Seconds()
			rep.SyncRuns = append(rep.SyncRuns, Run{WallSec: round(d), WithinSched: d <= cfg.interval.Seconds(), Unfinished: true})
			rep.TimedOut = true
			continue
		case <-tick.C:
		}
		count, sum, err := syncRuns(metrics)
		if err != nil {
			return nil, err
		}
		if count > lastCount {
			// Runs never overlap and are an interval apart: one new run.
			d := sum - lastSum
			rep.SyncRuns = append(rep.SyncRuns, Run{WallSec: round(d), WithinSched: d <= cfg.interval.Seconds()})
			lastCount, lastSum = count, sum
			nextStart = time.Now().Add(cfg.interval)
		}
	}
	wall := time.Since(winStart).Seconds()
	cpu := procstat.SelfCPU().Seconds() - cpu0
	pst1, perr := procstat.Read(pluginPID)
	pcpu1 := pst1.CPU.Seconds()
	if wait1, err := procstat.CPUWait(os.Getpid()); err == nil {
		rep.ConductorCPUWait = round((wait1 - wait0).Seconds())
	}
	if pwait1, err := procstat.CPUWait(pluginPID); err == nil && perr == nil {
		rep.PluginCPUWait = round((pwait1 - pwait0).Seconds())
	}
	rep.SchedLatency = histogramDelta(sched0, schedLatencies())
	if prof != nil {
		pprof.StopCPUProfile()
	}
	rep.WindowSec = round(wall)
	rep.ConductorCPU = round(cpu / wall)
	if perr == nil && plug.Status().PID == pluginPID {
		rep.PluginCPU = round((pcpu1 - pcpu0) / wall)
	}
	rep.PeakRSSMiB = round(procstat.SelfPeakRSSMiB())
	pluginRSS, _ := procstat.PeakRSSMiB(pluginPID)
	rep.PluginRSSMiB = round(pluginRSS)
	rep.Heartbeat = heartbeats.summary()
	rep.Verbs = cyc.verbs.summary()
	rep.Deploys, rep.Cleans, rep.LockedRetries, rep.Failures, rep.FirstFailure = cyc.counts()
	rep.PowerSync, err = syncOutcomes(metrics)
	if err != nil {
		return nil, err
	}
	rep.AllRunsInTime = true
	for _, r := range rep.SyncRuns {
		rep.AllRunsInTime = rep.AllRunsInTime && r.WithinSched
	}
	rep.Holds = rep.AllRunsInTime && rep.ConductorCPU < 1 && rep.Failures == 0 && !rep.TimedOut
	return rep, nil
}

// schedLatencies reads the runtime's histogram of goroutine scheduling
// latencies (cumulative since the process started).
func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histogramDelta summarises what a cumulative histogram of seconds
// gained between two reads: the count, and the p50, p99 and max as the
// upper bound of the bucket they fall in (the lower bound for the last,
// unbounded bucket), in milliseconds.
func histogramDelta(before, after *metrics.Float64Histogram) Latency {
	if after == nil {
		return Latency{}
	}
	counts := slices.Clone(after.Counts)
	if before != nil && len(before.Counts) == len(counts) {
		for i := range counts {
			counts[i] -= before.Counts[i]
		}
	}
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return Latency{}
	}
	upper := func(i int) float64 {
		b := after.Buckets[i+1]
		if math.IsInf(b, 1) {
			b = after.Buckets[i]
		}
		return round(b * 1e3)
	}
	at := func(p float64) float64 {
		want := uint64(math.Ceil(p * float64(total)))
		var sum uint64
		for i, c := range counts {
			if sum += c; sum >= want {
				return upper(i)
			}
		}
		return upper(len(counts) - 1)
	}
	last := 0
	for i, c := range counts {
		if c > 0 {
			last = i
		}
	}
	return Latency{Count: int(total), P50ms: at(0.50), P99ms: at(0.99), Maxms: upper(last)}
}

// countRedfish spreads redfish Redfish-like nodes evenly over n: node i
// is Redfish-like when it starts a new 1/redfish slice of the fleet.
func countRedfish(i, n, redfish int) bool {
	return i*redfish/n != (i+1)*redfish/n
}

// syncRuns reads how many power sync runs ended and their total seconds.
func syncRuns(g prometheus.Gatherer) (uint64, float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, 0, err
	}
	for _, f := range families {
		if f.GetName() == "anvil_conductor_power_sync_run_seconds" && len(f.GetMetric()) > 0 {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum(), nil
		}
	}
	return 0, 0, errors.New("the conductor has no anvil_conductor_power_sync_run_seconds metric")
}

// syncOutcomes reads the per-node power sync outcomes.
func syncOutcomes(g prometheus.Gatherer) (map[string]float64, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "anvil_conductor_power_sync_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// cycler drives the busy nodes.
type cycler struct {
	cond  *conductor.Conductor
	verbs *latencies
	w     *fleetwait.Waiter

	mu                      sync.Mutex
	deploys, cleans, failed int
	lockedRetries           int
	first                   string
}

func (c *cycler) resetCounts() {
	c.mu.Lock()
	c.deploys, c.cleans, c.lockedRetries = 0, 0, 0
	c.mu.Unlock()
}

func (c *cycler) counts() (deploys, cleans, locked, failed int, first string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deploys, c.cleans, c.lockedRetries, c.failed, c.first
}

func (c *cycler) fail(u, what string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed++
	if c.first == "" {
		c.first = fmt.Sprintf("node %s: %s: %v", u, what, err)
	}
}

// verb calls fn as a client calls a verb: a node still locked after the
// conductor's own lock retries (its reservation outlives the transition
// the client saw) is retried after a second, as Ironic's clients retry
// HTTP 409. Each call's latency is recorded.
func (c *cycler) verb(ctx context.Context, fn func() error) error {
	for {
		start := time.Now()
		err := fn()
		c.verbs.add(time.Since(start))
		if !errors.Is(err, baremetal.ErrNodeLocked) {
			return err
		}
		c.mu.Lock()
		c.lockedRetries++
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// loop cycles one node until ctx ends; a node that fails stops cycling
// and is counted.
func (c *cycler) loop(ctx context.Context, u string, delay time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	steps := []struct {
		name   string
		target statemachine.State
		verb   func() error
		done   *int
	}{
		{"deploy", statemachine.Active, func() error {
			// Undeploy wiped instance_info, as Ironic does: a client sets
			// the image before every deploy.
			if err := c.verb(ctx, func() error {
				_, err := c.cond.Update(ctx, u, func(n *baremetal.Node) error {
					n.InstanceInfo = map[string]any{"image_source": imageSource, "image_checksum": imageChecksum}
					return nil
				})
				return err
			}); err != nil {
				return err
			}
			return c.verb(ctx, func() error { return c.cond.Deploy(ctx, u, conductor.DeployOptions{}) })
		}, &c.deploys},
		{"undeploy", statemachine.Available, func() error { return c.verb(ctx, func() error { return c.cond.Undeploy(ctx, u) }) }, &c.cleans},
	}
	for {
		for _, s := range steps {
			ch := c.w.Expect(u)
			err := s.verb()
			if ctx.Err() != nil {
				c.w.Forget(u)
				return
			}
			if err != nil {
				c.w.Forget(u)
				c.fail(u, s.name, err)
				return
			}
			var got string
			select {
			case <-ctx.Done():
				c.w.Forget(u)
				return
			case got = <-ch:
			}
			c.w.Forget(u)
			if got != string(s.target) {
				n, _ := c.cond.Store().GetNode(context.Background(), u)
				msg := ""
				if n != nil {
					msg = n.LastError
				}
				c.fail(u, s.name, fmt.Errorf("ended in %q: %s", got, msg))
				return
			}
			c.mu.Lock()
			*s.done++
			c.mu.Unlock()
		}
	}
}
