// Command fleetbench runs the fleet workload Ironic was measured with
// (enroll, manage, provide through automated cleaning, deploy, undeploy
// through cleaning; 16 concurrent clients) on one Anvil conductor through
// the public Go API, and prints one JSON object with per-phase wall time,
// nodes/s and CPU time, the total, and peak resident memory.
//
// By default nodes use fake-hardware with the fake deploy interface, as
// Ironic's run did, on a SQLite file with the embedded default durability
// (WAL, synchronous=NORMAL). -sync-full fsyncs every commit
// (synchronous=FULL, as Ironic's SQLite does); -db takes a PostgreSQL DSN,
// and -pg-synchronous-commit sets synchronous_commit for the run's own
// sessions (the headline figures keep the server's default, on).
// -agent deploys with the direct interface and simulated agents over HTTP
// instead, cleaning with the agent's steps.
//
// The bookkeeping is Ironic's, node by node: every verb is validated
// against the state machine, every operation takes and releases the node's
// reservation, every state change (intermediate ones included) is its own
// transaction, and nothing is batched across nodes.
//
// The conductor keeps Ironic's concurrency limits (250 nodes deploying, 50
// cleaning; -max-concurrent-deploy and -max-concurrent-clean change them).
// Each client waits for its node before taking the next, so at most
// -clients nodes are in flight and the default 16 clients never reach
// them; a verb the limits refuse anyway (more clients than the limit) is
// retried after a short back-off, inside the phase's wall time, and the
// phase reports how many retries there were (limit_retries).
//
// -plugin serves the fake implementations from the real fake plugin
// (plugins/fake, built with go build unless -plugin-bin names the
// executable) as a separate process through the driver plugin host, as an
// operator's plugin directory would; the registry, the conductor and the
// workload are the same. It runs the workload four times in the one
// invocation, each on a fresh database: in process, through the plugin,
// through the plugin, in process (so that warm-up and any drift of the
// machine's load fall on both sides alike), and prints the four reports
// and the ratio of the plugin runs' total wall time to the in-process
// runs', so the plugin's cost is always quoted against a baseline
// measured on the same machine at the same time. Its CPU figures add the
// plugin process's CPU time (plugin_cpu_s) to the host's.
//
// Usage:
//
//	go run ./examples/fleetbench -nodes 1000 [-clients 16] [-sync-full] [-db DSN] [-pg-synchronous-commit off] [-agent] [-plugin [-plugin-bin PATH]]
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
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
)

type config struct {
	nodes    int
	clients  int
	workers  int
	db       string
	syncFull bool
	// pgSyncCommit is PostgreSQL's synchronous_commit for the
	// benchmark's own sessions ("": the server's setting).
	pgSyncCommit string
	agent        bool
	// maxConcurrentDeploy and maxConcurrentClean are the conductor's
	// concurrency limits (0: Ironic's defaults, negative: none).
	maxConcurrentDeploy int
	maxConcurrentClean  int
	// fakeDelay makes every fake-hardware operation wait (tests only:
	// it keeps nodes in cleaning and deploying long enough to overlap).
	fakeDelay time.Duration
	// pluginBin, when set, is the anvil-driver-fake executable serving
	// the fake implementations out of process instead of in process.
	pluginBin string
}

// Phase is one phase's figures.
type Phase struct {
	Name      string  `json:"phase"`
	Nodes     int     `json:"nodes"`
	WallSec   float64 `json:"wall_s"`
	NodesPerS float64 `json:"nodes_per_s"`
	CPUSec    float64 `json:"cpu_s"`
	// PluginCPUSec is the plugin process's share of CPUSec (plugin mode).
	PluginCPUSec float64 `json:"plugin_cpu_s,omitempty"`
	Failures     int     `json:"failures"`
	IronicWall   float64 `json:"ironic_wall_s,omitempty"`
	Speedup      float64 `json:"speedup_vs_ironic,omitempty"`
	// LimitRetries counts verbs refused by a concurrency limit and
	// retried (their back-off is part of the wall time).
	LimitRetries int `json:"limit_retries,omitempty"`
}

// Report is the JSON fleetbench prints.
type Report struct {
	Nodes        int     `json:"nodes"`
	Clients      int     `json:"clients"`
	Workers      int     `json:"workers"`
	Mode         string  `json:"mode"`
	Database     string  `json:"database"`
	Durability   string  `json:"durability"`
	GoMaxProcs   int     `json:"gomaxprocs"`
	Phases       []Phase `json:"phases"`
	TotalWallSec float64 `json:"total_wall_s"`
	TotalCPUSec  float64 `json:"total_cpu_s"`
	// PluginCPUSec is the plugin process's share of TotalCPUSec.
	PluginCPUSec float64 `json:"plugin_cpu_s,omitempty"`
	// PeakRSSMiB is the benchmark process's; a plugin process's memory is
	// PluginRSSMiB.
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	PluginRSSMiB float64 `json:"plugin_rss_mib,omitempty"`
	Failures     int     `json:"failures"`
}

// ironic1000 is Ironic 21.4's wall time per phase for 1,000 nodes on this
// machine class (from the issue); speedups are reported against it when
// -nodes is 1000.
var ironic1000 = map[string]float64{"enroll": 22.2, "manage": 58.8, "provide": 84.9, "deploy": 92.9, "undeploy": 104.8}

func main() {
	var cfg config
	flag.IntVar(&cfg.nodes, "nodes", 1000, "number of nodes")
	flag.IntVar(&cfg.clients, "clients", 16, "concurrent clients")
	flag.IntVar(&cfg.workers, "workers", 64, "conductor worker pool size")
	flag.StringVar(&cfg.db, "db", "", "SQLite file path or PostgreSQL DSN; default: a SQLite file in a temporary directory")
	flag.BoolVar(&cfg.syncFull, "sync-full", false, "SQLite synchronous=FULL (fsync every commit) instead of NORMAL")
	flag.StringVar(&cfg.pgSyncCommit, "pg-synchronous-commit", "", "PostgreSQL synchronous_commit for this run's sessions only (on, off, ...; default: the server's)")
	flag.BoolVar(&cfg.agent, "agent", false, "deploy with the direct interface and simulated agents over HTTP")
	flag.IntVar(&cfg.maxConcurrentDeploy, "max-concurrent-deploy", 0, "nodes deploying at once before deploys are refused and retried (0: Ironic's 250; negative: no limit)")
	flag.IntVar(&cfg.maxConcurrentClean, "max-concurrent-clean", 0, "nodes cleaning at once before provide and undeploy are refused and retried (0: Ironic's 50; negative: no limit)")
	withPlugin := flag.Bool("plugin", false, "run the workload in process and then with the fake implementations served by the fake plugin process; print both and the ratio")
	pluginBin := flag.String("plugin-bin", "", "with -plugin: the anvil-driver-fake executable to use (default: go build ./plugins/fake)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	var out any
	failures := 0
	if *withPlugin {
		cmp, err := comparePlugin(context.Background(), cfg, *pluginBin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench:", err)
			os.Exit(1)
		}
		out = cmp
		for _, r := range append(slices.Clone(cmp.InProcess), cmp.Plugin...) {
			failures += r.Failures
		}
	} else {
		rep, err := run(context.Background(), cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench:", err)
			os.Exit(1)
		}
		out, failures = rep, rep.Failures
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(out)
	if failures > 0 {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// Comparison is what fleetbench -plugin prints: the same workload in
// process and through the fake plugin process, measured in the order
// in process, plugin, plugin, in process in one invocation.
type Comparison struct {
	InProcess []*Report `json:"in_process"`
	Plugin    []*Report `json:"plugin"`
	// TotalWallRatio is the plugin runs' total wall time over the
	// in-process runs'.
	TotalWallRatio float64 `json:"total_wall_ratio"`
	// TotalCPURatio compares CPU time the same way, the plugin process's
	// included.
	TotalCPURatio float64 `json:"total_cpu_ratio"`
}

// comparePlugin runs the workload in process, twice through the fake
// plugin at bin (built first when bin is empty), and in process again.
func comparePlugin(ctx context.Context, cfg config, bin string) (*Comparison, error) {
	if bin == "" {
		dir, err := os.MkdirTemp("", "anvil-fleetbench-plugin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if bin, err = buildFakePlugin(ctx, dir); err != nil {
			return nil, err
		}
	}
	c := &Comparison{}
	var inWall, inCPU, outWall, outCPU float64
	for _, viaPlugin := range []bool{false, true, true, false} {
		rc := cfg
		if viaPlugin {
			rc.pluginBin = bin
		}
		rep, err := run(ctx, rc)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", map[bool]string{false: "in process", true: "through the plugin"}[viaPlugin], err)
		}
		if viaPlugin {
			c.Plugin = append(c.Plugin, rep)
			outWall, outCPU = outWall+rep.TotalWallSec, outCPU+rep.TotalCPUSec
		} else {
			c.InProcess = append(c.InProcess, rep)
			inWall, inCPU = inWall+rep.TotalWallSec, inCPU+rep.TotalCPUSec
		}
	}
	if inWall > 0 && inCPU > 0 {
		c.TotalWallRatio, c.TotalCPURatio = round(outWall/inWall), round(outCPU/inCPU)
	}
	return c, nil
}

// buildFakePlugin builds plugins/fake into dir as anvil-driver-fake with
// the go command, from within the module, and returns its path.
func buildFakePlugin(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, plugin.ExecutablePrefix+fake.Name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/anvilmetal/anvil/plugins/fake")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the fake plugin (run from the module, or pass -plugin-bin): %w: %s", err, out)
	}
	return bin, nil
}

// processRSSMiB returns the peak resident memory of process pid from
// /proc/<pid>/status (0 where there is none).
func processRSSMiB(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kib / 1024
		}
	}
	return 0
}

func run(ctx context.Context, cfg config) (*Report, error) {
	if cfg.nodes < 1 || cfg.clients < 1 {
		return nil, fmt.Errorf("-nodes and -clients must be at least 1")
	}
	rep := &Report{Nodes: cfg.nodes, Clients: cfg.clients, Workers: cfg.workers, Mode: "fake", GoMaxProcs: runtime.GOMAXPROCS(0)}
	var store *sqlstore.Store
	var err error
	if strings.HasPrefix(cfg.db, "postgres://") || strings.HasPrefix(cfg.db, "postgresql://") {
		dsn, durability := cfg.db, "postgresql default (synchronous_commit=on)"
		if cfg.pgSyncCommit != "" {
			// pgx sends an unknown DSN parameter as a run-time setting of
			// each session; the server's configuration is untouched.
			if dsn, err = withParam(dsn, "synchronous_commit", cfg.pgSyncCommit); err != nil {
				return nil, err
			}
			durability = "postgresql, synchronous_commit=" + cfg.pgSyncCommit + " for this run's sessions"
		}
		// Each run gets a schema of its own, dropped afterwards: rows
		// left by earlier runs (and their dead versions, where the
		// server runs without autovacuum, as these test machines do)
		// would otherwise slow every later run.
		var dropSchema func()
		if dsn, dropSchema, err = freshSchema(ctx, dsn); err != nil {
			return nil, err
		}
		defer dropSchema()
		store, err = sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{})
		rep.Database, rep.Durability = "postgresql", durability
	} else {
		path := cfg.db
		if path == "" {
			dir, derr := os.MkdirTemp("", "anvil-fleetbench-")
			if derr != nil {
				return nil, derr
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "anvil.db")
		}
		store, err = sqlstore.OpenSQLite(ctx, path, sqlstore.Options{SynchronousFull: cfg.syncFull})
		rep.Database, rep.Durability = "sqlite file", "WAL, synchronous=NORMAL"
		if cfg.syncFull {
			rep.Durability = "WAL, synchronous=FULL"
		}
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()

	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {fake.Name, agentdeploy.Name},
			driver.KindPower:  {fake.Name, simfleet.PowerName},
		}})
	var pluginPID int
	if cfg.pluginBin != "" {
		rep.Mode += "+plugin"
		host := plugin.NewHost(plugin.HostConfig{Logger: slog.New(slog.DiscardHandler)})
		defer host.Close()
		p, err := host.Load(ctx, cfg.pluginBin)
		if err != nil {
			return nil, err
		}
		if err := host.Register(reg); err != nil {
			return nil, err
		}
		pluginPID = p.Status().PID
	} else {
		fakeCfg := fake.Config{}
		if cfg.fakeDelay > 0 {
			fakeCfg.Delays = map[string]time.Duration{"*": cfg.fakeDelay}
		}
		if err := reg.Register(builtin.Bundle(fakeCfg)); err != nil {
			return nil, err
		}
	}
	// cpuSeconds counts the plugin process's CPU time with the host's.
	cpuSeconds := func() float64 { return procstat.SelfCPU().Seconds() + processCPUSeconds(pluginPID) }
	agentSettings := conductor.AgentSettings{}
	var fleet *simfleet.Fleet
	// In agent mode the agent API's listener is bound before the
	// conductor exists (the simulated fleet needs its URL) and served
	// once the conductor's handler exists; connections wait in the
	// backlog until then.
	var (
		ln  net.Listener
		srv *http.Server
	)
	if cfg.agent {
		rep.Mode = "agent"
		client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 60 * time.Second})
		if err != nil {
			return nil, err
		}
		defer client.Close()
		agentSettings.Client = client
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		srv = agentclient.NewServer(nil, agentclient.ServerConfig{})
		defer srv.Close()
		fleet, err = simfleet.New(simfleet.Config{APIURL: "http://" + ln.Addr().String(), HeartbeatInterval: 500 * time.Millisecond})
		if err != nil {
			return nil, err
		}
		defer fleet.Close()
		if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
			return nil, err
		}
		if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{})); err != nil {
			return nil, err
		}
	} else {
		// Registered for symmetry so the enabled lists resolve; unused.
		if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
			return nil, err
		}
		if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fake.NewPower(fake.Config{})); err != nil {
			return nil, err
		}
	}
	cond, err := conductor.New(store, reg, conductor.Options{
		Agent:    agentSettings,
		Hostname: "fleetbench", Workers: cfg.workers, Logger: slog.New(slog.DiscardHandler),
		MaxConcurrentDeploy: cfg.maxConcurrentDeploy, MaxConcurrentClean: cfg.maxConcurrentClean,
		// The waiter must see every node's last transition: room for a
		// whole fleet's transitions means none is dropped under load.
		WatchBuffer: max(conductor.DefaultWatchBuffer, 16*cfg.nodes),
	})
	if err != nil {
		return nil, err
	}
	if cfg.agent {
		h, err := agentclient.NewHandler(cond.AgentBackend(), agentclient.HandlerConfig{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, err
		}
		srv.Handler = h
		go srv.Serve(ln) // ends when srv.Close runs
	}
	if err := cond.Launch(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cond.Stop(sctx)
	}()

	w := fleetwait.New(cond)
	defer w.Close()

	uuids := make([]string, cfg.nodes)
	// Node names are unique per run, so runs can share a database.
	runID := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
	var reportOnce sync.Once
	firstFailure := func(what string, err error) {
		reportOnce.Do(func() { fmt.Fprintf(os.Stderr, "fleetbench: first failure: %s: %v\n", what, err) })
	}
	node := func(i int) *baremetal.Node {
		n := &baremetal.Node{Name: fmt.Sprintf("bench-%s-%06d", runID, i), Driver: builtin.FakeHardware,
			InstanceInfo: map[string]any{"image_source": "http://images.example.com/img.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}}
		if cfg.pluginBin != "" && cfg.fakeDelay > 0 {
			// The plugin process takes its delay from driver_info.
			n.DriverInfo = map[string]any{fake.DelayKey: cfg.fakeDelay.String()}
		}
		if cfg.agent {
			n.PowerInterface, n.DeployInterface = simfleet.PowerName, agentdeploy.Name
		} else {
			n.PowerInterface, n.DeployInterface = fake.Name, fake.Name
		}
		return n
	}
	type phase struct {
		name   string
		target statemachine.State
		verb   func(context.Context, string) error
	}
	phases := []phase{
		{"manage", statemachine.Manageable, cond.Manage},
		{"provide", statemachine.Available, cond.Provide},
		{"deploy", statemachine.Active, func(ctx context.Context, u string) error {
			return cond.Deploy(ctx, u, conductor.DeployOptions{})
		}},
		{"undeploy", statemachine.Available, cond.Undeploy},
	}
	totalStart, totalCPU, totalPluginCPU := time.Now(), cpuSeconds(), processCPUSeconds(pluginPID)

	// Enroll: 16 clients creating nodes one by one.
	start, cpu, pcpu := time.Now(), cpuSeconds(), processCPUSeconds(pluginPID)
	var mu sync.Mutex
	failures := 0
	parallel(cfg.nodes, cfg.clients, func(i int) {
		n, err := cond.Enroll(ctx, node(i))
		if err != nil {
			firstFailure("enroll", err)
			mu.Lock()
			failures++
			mu.Unlock()
			return
		}
		uuids[i] = n.UUID
	})
	p := phaseFigures("enroll", cfg.nodes, time.Since(start), cpuSeconds()-cpu, failures)
	p.PluginCPUSec = round(processCPUSeconds(pluginPID) - pcpu)
	rep.Phases = append(rep.Phases, p)

	for _, ph := range phases {
		start, cpu, pcpu := time.Now(), cpuSeconds(), processCPUSeconds(pluginPID)
		failures, retries := 0, 0
		parallel(cfg.nodes, cfg.clients, func(i int) {
			u := uuids[i]
			if u == "" {
				return
			}
			ch := w.Expect(u)
			n, err := retryOnLimit(ctx, func() error { return ph.verb(ctx, u) })
			if n > 0 {
				mu.Lock()
				retries += n
				mu.Unlock()
			}
			got := ""
			if err == nil {
				got = <-ch
			}
			w.Forget(u)
			if got != string(ph.target) {
				if err == nil {
					err = fmt.Errorf("node %s ended in %q", u, got)
				}
				firstFailure(ph.name, err)
				mu.Lock()
				failures++
				uuids[i] = ""
				mu.Unlock()
			}
		})
		p := phaseFigures(ph.name, cfg.nodes, time.Since(start), cpuSeconds()-cpu, failures)
		p.LimitRetries = retries
		p.PluginCPUSec = round(processCPUSeconds(pluginPID) - pcpu)
		rep.Phases = append(rep.Phases, p)
	}
	rep.TotalWallSec = time.Since(totalStart).Seconds()
	rep.TotalCPUSec = cpuSeconds() - totalCPU
	rep.PluginCPUSec = round(processCPUSeconds(pluginPID) - totalPluginCPU)
	rep.PeakRSSMiB = procstat.SelfPeakRSSMiB()
	rep.PluginRSSMiB = round(processRSSMiB(pluginPID))
	for i := range rep.Phases {
		rep.Failures += rep.Phases[i].Failures
		if cfg.nodes == 1000 && !cfg.agent {
			if iw, ok := ironic1000[rep.Phases[i].Name]; ok && rep.Phases[i].WallSec > 0 {
				rep.Phases[i].IronicWall = iw
				rep.Phases[i].Speedup = round(iw / rep.Phases[i].WallSec)
			}
		}
	}
	rep.TotalWallSec, rep.TotalCPUSec, rep.PeakRSSMiB = round(rep.TotalWallSec), round(rep.TotalCPUSec), round(rep.PeakRSSMiB)
	return rep, nil
}

// withParam sets a query parameter of a PostgreSQL URL.
func withParam(dsn, key, value string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("-db: %w", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// freshSchema creates an empty schema for one run and returns the DSN
// that uses it and the function that drops it.
func freshSchema(ctx context.Context, dsn string) (string, func(), error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	schema := "anvil_fleetbench_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return "", nil, fmt.Errorf("-db: %w", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("-db: creating schema %s: %w", schema, err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := db.ExecContext(dctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "fleetbench: dropping schema %s: %v\n", schema, err)
		}
		db.Close()
	}
	out, err := withParam(dsn, "search_path", schema)
	if err != nil {
		drop()
		return "", nil, err
	}
	return out, drop, nil
}

// processCPUSeconds is the CPU time of the plugin process pid, 0 when
// there is none.
func processCPUSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	st, err := procstat.Read(pid)
	if err != nil {
		return 0
	}
	return st.CPU.Seconds()
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func phaseFigures(name string, nodes int, wall time.Duration, cpu float64, failures int) Phase {
	return Phase{Name: name, Nodes: nodes, WallSec: round(wall.Seconds()), CPUSec: round(cpu), Failures: failures,
		NodesPerS: round(float64(nodes-failures) / wall.Seconds())}
}

// retryOnLimit calls verb until it is not refused by a concurrency limit
// (conductor.ErrConcurrentActionLimit: the refusal changed nothing), with
// a back-off doubling from 20 ms to 500 ms, and returns how many refusals
// it retried and its last error. It stops retrying when ctx ends.
func retryOnLimit(ctx context.Context, verb func() error) (int, error) {
	backoff, retries := 20*time.Millisecond, 0
	for {
		err := verb()
		if !errors.Is(err, conductor.ErrConcurrentActionLimit) {
			return retries, err
		}
		retries++
		select {
		case <-ctx.Done():
			return retries, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// parallel runs fn(0..n-1) on k goroutines, each taking the next index.
func parallel(n, k int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for c := 0; c < k; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
