// Command quickstart runs Anvil end to end on a simulated fleet: an
// embedded SQLite database in a temporary directory, one conductor, the
// agent API on a loopback port, and fake-hardware nodes whose ramdisk is a
// simulated Ironic Python Agent talking real HTTP. It enrolls the fleet and
// takes it through manage, inspect (in-band, with the agent inspect
// interface: the ramdisk posts its hardware inventory to the agent API),
// provide (automated cleaning with the agent's steps), deploy (the direct
// deploy interface, with a config drive) and undeploy, showing progress,
// and ends with a summary table. It exits with status 1 if any node fails.
//
// The conductor keeps Ironic's concurrency limits (at most 250 nodes
// deploying and 50 cleaning at once, -max-concurrent-deploy and
// -max-concurrent-clean to change them): a verb refused by a limit is
// retried after a short back-off, and the progress line shows the nodes
// waiting for it.
//
// Usage:
//
//	go run ./examples/quickstart [-nodes 20] [-db path-or-postgres-dsn] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
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
	"github.com/anvilmetal/anvil/statemachine"
)

func main() {
	nodes := flag.Int("nodes", 20, "number of simulated nodes")
	db := flag.String("db", "", "SQLite file path or PostgreSQL DSN (postgres://...); default: a SQLite file in a temporary directory")
	keep := flag.Bool("keep", false, "keep the database (and its temporary directory) for inspection")
	verbose := flag.Bool("v", false, "log the conductor's and the agents' debug output to stderr")
	maxDeploy := flag.Int("max-concurrent-deploy", 0, "nodes deploying at once before deploys wait (0: Ironic's default 250; negative: no limit)")
	maxClean := flag.Int("max-concurrent-clean", 0, "nodes cleaning at once before provide and undeploy wait (0: Ironic's default 50; negative: no limit)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, config{nodes: *nodes, db: *db, keep: *keep, verbose: *verbose, out: os.Stdout, tty: isTerminal(os.Stdout),
		maxConcurrentDeploy: *maxDeploy, maxConcurrentClean: *maxClean})
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

type config struct {
	nodes   int
	db      string
	keep    bool
	verbose bool
	out     io.Writer
	tty     bool
	// maxConcurrentDeploy and maxConcurrentClean are the conductor's
	// concurrency limits (0: Ironic's defaults).
	maxConcurrentDeploy int
	maxConcurrentClean  int
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// phaseResult is one row of the summary table.
type phaseResult struct {
	name     string
	nodes    int
	elapsed  time.Duration
	failures int
	// waits counts the verbs refused by a concurrency limit and retried.
	waits int
}

func run(ctx context.Context, cfg config) (int, error) {
	if cfg.nodes < 1 {
		return 2, fmt.Errorf("-nodes must be at least 1")
	}
	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	store, where, cleanup, err := openStore(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.out, "Anvil quickstart: %d simulated nodes, database %s\n", cfg.nodes, where)

	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 30 * time.Second, Logger: logger})
	if err != nil {
		return 1, err
	}
	defer client.Close()

	// The agent API listens on a loopback port; agents look up and
	// heartbeat there. The listener is bound now because the simulated
	// fleet needs its URL before the conductor exists; it is served once
	// the conductor's handler exists (connections wait in the backlog
	// until then).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1, fmt.Errorf("agent API listener: %w", err)
	}
	defer ln.Close()
	apiURL := "http://" + ln.Addr().String()
	// The agent endpoints take unauthenticated requests, so the server
	// bounds every timeout and the header size (agentclient.NewServer);
	// the handler, set once the conductor exists, bounds the bodies.
	srv := agentclient.NewServer(nil, agentclient.ServerConfig{Logger: logger})
	defer srv.Close()

	fleet, err := simfleet.New(simfleet.Config{APIURL: apiURL, Logger: logger})
	if err != nil {
		return 1, err
	}
	defer fleet.Close()

	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy:  {agentdeploy.Name, fake.Name},
			driver.KindPower:   {simfleet.PowerName, fake.Name},
			driver.KindInspect: {agentdeploy.InspectName, fake.Name},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		return 1, err
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		return 1, err
	}
	if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{})); err != nil {
		return 1, err
	}
	// In-band inspection with the default hooks: the ramdisk's inventory
	// fills cpus, memory_mb, local_gb and cpu_arch and creates the PXE
	// port.
	inspect, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{Logger: logger})
	if err != nil {
		return 1, err
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, inspect); err != nil {
		return 1, err
	}

	cond, err := conductor.New(store, reg, conductor.Options{
		Agent:               conductor.AgentSettings{Client: client, APIURL: apiURL},
		Hostname:            "quickstart-conductor",
		Workers:             64,
		Logger:              logger,
		MaxConcurrentDeploy: cfg.maxConcurrentDeploy,
		MaxConcurrentClean:  cfg.maxConcurrentClean,
	})
	if err != nil {
		return 1, err
	}
	h, err := agentclient.NewHandler(cond.AgentBackend(), agentclient.HandlerConfig{Logger: logger})
	if err != nil {
		return 1, err
	}
	srv.Handler = h
	go srv.Serve(ln) // ends when srv.Close runs
	if err := cond.Launch(ctx); err != nil {
		return 1, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cond.Stop(sctx)
	}()
	fmt.Fprintf(cfg.out, "Conductor %s started; agent API at %s; agents served at %s\n\n", cond.Hostname(), apiURL, fleet.Server().URL())

	tr := newTracker(cond)
	defer tr.close()

	var results []phaseResult
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	var uuids []string
	// Phase 1: enroll.
	start := time.Now()
	enrollFailures := 0
	for i := 0; i < cfg.nodes; i++ {
		n, err := cond.Enroll(ctx, &baremetal.Node{
			Name:             fmt.Sprintf("qs-%s-%03d", suffix, i),
			Driver:           builtin.FakeHardware,
			PowerInterface:   simfleet.PowerName,
			DeployInterface:  agentdeploy.Name,
			InspectInterface: agentdeploy.InspectName,
			InstanceInfo:     map[string]any{"image_source": "http://images.example.com/ubuntu-24.04.qcow2", "image_checksum": "sha256:0"},
		})
		if err != nil {
			fmt.Fprintf(cfg.out, "enroll node %d: %v\n", i, err)
			enrollFailures++
			continue
		}
		tr.set(n.UUID, string(n.ProvisionState))
		uuids = append(uuids, n.UUID)
	}
	results = append(results, phaseResult{name: "enroll", nodes: cfg.nodes, elapsed: time.Since(start), failures: enrollFailures})
	printPhase(cfg.out, results[len(results)-1])

	type phase struct {
		name   string
		target statemachine.State
		verb   func(ctx context.Context, uuid string) error
	}
	phases := []phase{
		{"manage", statemachine.Manageable, cond.Manage},
		{"inspect", statemachine.Manageable, cond.Inspect},
		{"provide", statemachine.Available, cond.Provide},
		{"deploy", statemachine.Active, func(ctx context.Context, uuid string) error {
			cd := fmt.Sprintf(`{"meta_data":{"hostname":"%s"},"user_data":"#cloud-config\nruncmd: [echo hello]\n"}`, uuid[:8])
			return cond.Deploy(ctx, uuid, conductor.DeployOptions{ConfigDrive: []byte(cd)})
		}},
		{"undeploy", statemachine.Available, cond.Undeploy},
	}
	live := uuids
	for _, ph := range phases {
		if ctx.Err() != nil {
			return 1, ctx.Err()
		}
		start := time.Now()
		tr.begin(live)
		// The verbs are issued while the progress is shown, since some
		// may wait for a concurrency limit.
		issued := make(chan issueResult, 1)
		go func() { issued <- issue(ctx, live, ph.verb, tr) }()
		final := tr.wait(ctx, ph.name, cfg.out, cfg.tty)
		res := <-issued
		if ctx.Err() != nil {
			return 1, ctx.Err()
		}
		var failed []string
		for _, f := range res.refused {
			fmt.Fprintf(cfg.out, "%s %s: %v\n", ph.name, f.uuid, f.err)
			failed = append(failed, f.uuid)
		}
		var ok []string
		for _, u := range live {
			if final[u] == string(ph.target) {
				ok = append(ok, u)
			} else if !contains(failed, u) {
				failed = append(failed, u)
				n, _ := store.GetNode(ctx, u)
				reason := ""
				if n != nil {
					reason = n.LastError
				}
				fmt.Fprintf(cfg.out, "%s %s ended in %q: %s\n", ph.name, u, final[u], reason)
			}
		}
		r := phaseResult{name: ph.name, nodes: len(live), elapsed: time.Since(start), failures: len(failed), waits: res.waits}
		results = append(results, r)
		printPhase(cfg.out, r)
		live = ok
	}
	total := 0
	for _, r := range results {
		total += r.failures
	}
	printSummary(cfg.out, results)
	if total > 0 {
		return 1, fmt.Errorf("%d node operations failed", total)
	}
	fmt.Fprintln(cfg.out, "\nAll nodes went enroll → manageable → inspected → available → active → available.")
	if cfg.keep {
		fmt.Fprintf(cfg.out, "Database kept at %s\n", where)
	}
	return 0, nil
}

// Back-off bounds of a verb refused by a concurrency limit.
const (
	limitBackoffMin = 100 * time.Millisecond
	limitBackoffMax = time.Second
)

// verbFailure is a verb refused for good.
type verbFailure struct {
	uuid string
	err  error
}

// issueResult is what issue reports: the verbs refused for good, and how
// many times a concurrency limit made a verb wait.
type issueResult struct {
	refused []verbFailure
	waits   int
}

// issue calls verb on every node in order. A verb refused by a
// concurrency limit (conductor.ErrConcurrentActionLimit: too many nodes
// deploying or cleaning) changed nothing; it is retried after a back-off
// (doubling from limitBackoffMin to limitBackoffMax), and until it is
// accepted the tracker shows it and the nodes after it as waiting. A verb
// refused for another reason is abandoned. It returns early when ctx
// ends.
func issue(ctx context.Context, uuids []string, verb func(context.Context, string) error, tr *tracker) issueResult {
	var res issueResult
	backoff := limitBackoffMin
	for i := 0; i < len(uuids); {
		u := uuids[i]
		err := verb(ctx, u)
		switch {
		case err == nil:
			tr.setWaiting(false, u)
			backoff = limitBackoffMin
			i++
		case errors.Is(err, conductor.ErrConcurrentActionLimit):
			res.waits++
			// The limit counts every node, so the nodes after this one
			// would be refused too: they wait behind it.
			tr.setWaiting(true, uuids[i:]...)
			select {
			case <-ctx.Done():
				return res
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, limitBackoffMax)
		default:
			tr.setWaiting(false, u)
			tr.abandon(u)
			res.refused = append(res.refused, verbFailure{uuid: u, err: err})
			i++
		}
	}
	return res
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func openStore(ctx context.Context, cfg config) (baremetal.Store, string, func(), error) {
	if strings.HasPrefix(cfg.db, "postgres://") || strings.HasPrefix(cfg.db, "postgresql://") {
		s, err := sqlstore.OpenPostgres(ctx, cfg.db, sqlstore.Options{})
		if err != nil {
			return nil, "", nil, err
		}
		return s, "PostgreSQL", func() { s.Close() }, nil
	}
	path := cfg.db
	var dir string
	if path == "" {
		var err error
		dir, err = os.MkdirTemp("", "anvil-quickstart-")
		if err != nil {
			return nil, "", nil, err
		}
		path = filepath.Join(dir, "anvil.db")
	}
	s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	if err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		return nil, "", nil, err
	}
	return s, path, func() {
		s.Close()
		if dir != "" && !cfg.keep {
			os.RemoveAll(dir)
		}
	}, nil
}

func printPhase(w io.Writer, r phaseResult) {
	waits := ""
	if r.waits > 0 {
		waits = fmt.Sprintf("  (verbs retried %d times after a concurrency limit refusal)", r.waits)
	}
	fmt.Fprintf(w, "%-9s %4d nodes in %8s  (%7.1f nodes/s)  failures: %d%s\n", r.name, r.nodes,
		r.elapsed.Round(time.Millisecond), rate(r), r.failures, waits)
}

func rate(r phaseResult) float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.nodes-r.failures) / r.elapsed.Seconds()
}

func printSummary(w io.Writer, results []phaseResult) {
	fmt.Fprintf(w, "\n%-10s %6s %10s %10s %9s\n", "phase", "nodes", "time", "nodes/s", "failures")
	fmt.Fprintln(w, strings.Repeat("-", 49))
	var total time.Duration
	for _, r := range results {
		total += r.elapsed
		fmt.Fprintf(w, "%-10s %6d %10s %10.1f %9d\n", r.name, r.nodes, r.elapsed.Round(time.Millisecond), rate(r), r.failures)
	}
	fmt.Fprintln(w, strings.Repeat("-", 49))
	fmt.Fprintf(w, "%-10s %6s %10s\n", "total", "", total.Round(time.Millisecond))
}

// tracker follows every node's provision state from the conductor's
// events.
type tracker struct {
	mu      sync.Mutex
	state   map[string]string
	pending map[string]bool
	// waiting marks nodes whose verb waits for a concurrency limit.
	waiting map[string]bool
	changed chan struct{}
	cancel  func()
}

// waitingLabel is how the progress line counts the nodes whose verb
// waits for a concurrency limit.
const waitingLabel = "waiting (concurrency limit)"

func newTracker(c *conductor.Conductor) *tracker {
	tr := &tracker{state: map[string]string{}, pending: map[string]bool{}, waiting: map[string]bool{}, changed: make(chan struct{}, 1)}
	tr.cancel = c.Subscribe(conductor.WatchFilter{Types: []conductor.EventType{conductor.EventTransition}}, func(e conductor.Event) {
		tr.mu.Lock()
		tr.state[e.NodeUUID] = string(e.To)
		if tr.pending[e.NodeUUID] && settled(e.To) {
			delete(tr.pending, e.NodeUUID)
		}
		tr.mu.Unlock()
		select {
		case tr.changed <- struct{}{}:
		default:
		}
	})
	return tr
}

func (tr *tracker) close() { tr.cancel() }

func (tr *tracker) set(uuid, state string) {
	tr.mu.Lock()
	tr.state[uuid] = state
	tr.mu.Unlock()
}

// begin marks nodes as working: a phase waits until each settles.
func (tr *tracker) begin(uuids []string) {
	tr.mu.Lock()
	for _, u := range uuids {
		tr.pending[u] = true
	}
	tr.mu.Unlock()
}

// setWaiting marks (on) or unmarks the nodes as waiting for a
// concurrency limit.
func (tr *tracker) setWaiting(on bool, uuids ...string) {
	tr.mu.Lock()
	for _, u := range uuids {
		if on {
			tr.waiting[u] = true
		} else {
			delete(tr.waiting, u)
		}
	}
	tr.mu.Unlock()
	select {
	case tr.changed <- struct{}{}:
	default:
	}
}

func (tr *tracker) abandon(uuid string) {
	tr.mu.Lock()
	delete(tr.pending, uuid)
	tr.mu.Unlock()
}

// settled reports whether a node in state s has finished its operation:
// a stable, failure or hold state.
func settled(s statemachine.State) bool {
	return statemachine.IsStable(s) || statemachine.IsFailure(s) ||
		s == statemachine.CleanHold || s == statemachine.DeployHold || s == statemachine.ServiceHold
}

// wait shows progress until every pending node settled and returns the
// final states.
func (tr *tracker) wait(ctx context.Context, phase string, w io.Writer, tty bool) map[string]string {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastPlain := time.Now()
	for {
		tr.mu.Lock()
		left := len(tr.pending)
		total := len(tr.state)
		counts := map[string]int{}
		for u := range tr.pending {
			if tr.waiting[u] {
				counts[waitingLabel]++
			} else {
				counts[tr.state[u]]++
			}
		}
		tr.mu.Unlock()
		done := total - left
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", progressLine(phase, done, total, counts))
		} else if time.Since(lastPlain) >= time.Second && left > 0 {
			fmt.Fprintln(w, progressLine(phase, done, total, counts))
			lastPlain = time.Now()
		}
		if left == 0 {
			if tty {
				fmt.Fprint(w, "\r\033[K")
			}
			tr.mu.Lock()
			out := make(map[string]string, len(tr.state))
			for k, v := range tr.state {
				out[k] = v
			}
			tr.mu.Unlock()
			return out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tr.changed:
		case <-tick.C:
		}
	}
}

func progressLine(phase string, done, total int, counts map[string]int) string {
	const width = 30
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Strings(states)
	var parts []string
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
	}
	return fmt.Sprintf("%-9s [%s%s] %d/%d  %s", phase, strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, strings.Join(parts, " · "))
}
