// Command multiconductor shows several Anvil conductors sharing one
// PostgreSQL database: it starts three conductor processes on this
// machine (each with its own agent API port), simulated machines whose
// ramdisk agents talk to the conductor owning their node, deploys the
// fleet, shows who owns what, SIGKILLs one conductor mid-deploy, shows
// the takeover, and prints a summary. See README.md.
//
//	go run ./examples/multiconductor -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/internal/clusterlab"
)

func main() {
	// The same binary runs the conductors: "multiconductor conductor ...".
	if len(os.Args) > 1 && os.Args[1] == "conductor" {
		os.Exit(clusterlab.MainConductor(os.Args[2:], os.Stdout, os.Stderr))
	}
	dsn := flag.String("dsn", os.Getenv("ANVIL_POSTGRES_DSN"), "PostgreSQL DSN shared by the conductors (default $ANVIL_POSTGRES_DSN)")
	nodes := flag.Int("nodes", 30, "number of simulated machines")
	ring := flag.String("ring", "balanced", "hash ring algorithm: balanced or ironic (to agree with Ironic conductors)")
	hbTimeout := flag.Duration("heartbeat-timeout", 3*time.Second, "conductor heartbeat timeout (scaled down from Ironic's 60 s for the demo)")
	logPath := flag.String("log", "multiconductor.log", "where the conductors' JSON logs go")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "multiconductor: -dsn is required (a PostgreSQL database the demo may create tables in)")
		os.Exit(2)
	}
	if err := run(*dsn, *nodes, *ring, *hbTimeout, *logPath); err != nil {
		fmt.Fprintln(os.Stderr, "multiconductor:", err)
		os.Exit(1)
	}
}

func run(dsn string, count int, ring string, hbTimeout time.Duration, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ringCfg, err := clusterlab.RingConfig(ring)
	if err != nil {
		return err
	}
	store, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	notifier, err := sqlstore.NewNotifier(ctx, dsn, nil)
	if err != nil {
		return err
	}
	defer notifier.Close()
	ringOpts := conductor.RingOptions{Ring: ringCfg, HeartbeatTimeout: hbTimeout, ResetInterval: time.Second}
	// Agent commands take 250 ms, like a short real step, so the kill below
	// finds deploys in flight.
	lab, err := clusterlab.NewLab(clusterlab.LabConfig{Store: store, Ring: ringOpts, Notifier: notifier, HeartbeatInterval: time.Second,
		CommandDelay: 250 * time.Millisecond})
	if err != nil {
		return err
	}
	defer lab.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logs.Close()
	check := hbTimeout / 3
	pcfg := clusterlab.ProcessConfig{Binary: self, Prefix: []string{"conductor"}, DSN: dsn, LabURL: lab.URL(), Stderr: logs,
		Args: []string{"-ring", ring, "-heartbeat-timeout", hbTimeout.String(), "-keepalive", (hbTimeout / 6).String(),
			"-orphan-check", check.String(), "-ring-reset", "1s", "-intent-poll", "1s", "-callback-timeout", "60s"}}

	hosts := []string{"conductor-a", "conductor-b", "conductor-c"}
	procs := make([]*clusterlab.Process, len(hosts))
	for i, h := range hosts {
		p, err := clusterlab.StartProcess(ctx, pcfg, h)
		if err != nil {
			return err
		}
		defer p.Stop(10 * time.Second)
		procs[i] = p
		if err := lab.SetConductor(h, p.AgentAPI); err != nil {
			return err
		}
		fmt.Printf("started %s (pid %d), agent API %s\n", h, pidOf(p), p.AgentAPI)
	}
	verbs := clusterlab.NewVerbClient(procs)
	prefix := fmt.Sprintf("demo-%d", time.Now().Unix())
	uuids, err := clusterlab.EnrollFleet(ctx, store, lab.URL(), prefix, count)
	if err != nil {
		return err
	}
	fmt.Printf("enrolled %d machines (%s-0000...)\n", count, prefix)
	time.Sleep(1500 * time.Millisecond) // let every conductor see the others
	showOwners(lab, uuids, "ownership of the fleet (hash ring, algorithm "+ring+")")

	start := time.Now()
	fmt.Println("manage + provide (automated cleaning through the agents)...")
	if err := drive(ctx, verbs, store, uuids, [][2]string{{"manage", "manageable"}, {"provide", "available"}}); err != nil {
		return err
	}
	fmt.Printf("  all available after %.1fs\n", time.Since(start).Seconds())

	fmt.Println("deploy; one conductor is SIGKILLed while the deploys run...")
	deployed := make(chan error, 1)
	go func() { deployed <- drive(ctx, verbs, store, uuids, [][2]string{{"deploy", "active"}}) }()
	// Kill the victim while it is at work: as soon as it holds a
	// reservation (a step running), or after 5 s in any case.
	victim := procs[1]
	var held []*baremetal.Node
	for waitUntil := time.Now().Add(5 * time.Second); time.Now().Before(waitUntil); time.Sleep(5 * time.Millisecond) {
		if held, _ = store.ListNodes(ctx, baremetal.NodeFilter{ReservedBy: victim.Host}, baremetal.Page{}); len(held) > 0 {
			break
		}
	}
	owned, midDeploy := 0, 0
	for _, id := range uuids {
		if lab.Owner(id) != victim.Host {
			continue
		}
		owned++
		if n, err := store.GetNode(ctx, id); err == nil && n.ProvisionState != "active" {
			midDeploy++
		}
	}
	victim.Kill()
	killedAt := time.Now()
	fmt.Printf("SIGKILLed %s: it owned %d machines (%d not yet active) and held %d reservations\n", victim.Host, owned, midDeploy, len(held))
	released, moved := time.Duration(-1), time.Duration(-1)
	for released < 0 || moved < 0 {
		if released < 0 {
			if still, err := store.ListNodes(ctx, baremetal.NodeFilter{ReservedBy: victim.Host}, baremetal.Page{}); err == nil && len(still) == 0 {
				released = time.Since(killedAt)
			}
		}
		if moved < 0 {
			left := 0
			for _, id := range uuids {
				if lab.Owner(id) == victim.Host {
					left++
				}
			}
			if left == 0 {
				moved = time.Since(killedAt)
			}
		}
		if time.Since(killedAt) > 4*hbTimeout {
			return fmt.Errorf("%s's machines not taken over after %s", victim.Host, 4*hbTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(held) > 0 {
		fmt.Printf("  its reservations were released by a survivor %.1fs after the kill\n", released.Seconds())
	}
	fmt.Printf("  the survivors' rings dropped it %.1fs after the kill (heartbeat timeout %s, measured from its last keepalive)\n",
		moved.Seconds(), hbTimeout)
	showOwners(lab, uuids, "ownership after the takeover")
	if err := <-deployed; err != nil {
		fmt.Println("  deploy:", err)
	}
	return summary(ctx, store, lab, uuids, time.Since(start))
}

func pidOf(p *clusterlab.Process) int { return p.PID() }

func showOwners(lab *clusterlab.Lab, uuids []string, title string) {
	counts := map[string]int{}
	for _, id := range uuids {
		counts[lab.Owner(id)]++
	}
	hosts := make([]string, 0, len(counts))
	for h := range counts {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	fmt.Println(title + ":")
	for _, h := range hosts {
		fmt.Printf("  %-12s %4d machines\n", h, counts[h])
	}
}

// drive takes every node through the verbs, each waiting for its state.
func drive(ctx context.Context, verbs *clusterlab.VerbClient, store baremetal.Store, uuids []string, seq [][2]string) error {
	for _, step := range seq {
		issueBy := time.Now().Add(3 * time.Minute)
		for _, id := range uuids {
			if err := callVerb(ctx, verbs, id, step[0], issueBy); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			all, err := store.ListNodes(ctx, baremetal.NodeFilter{}, baremetal.Page{})
			if err != nil {
				return err
			}
			done := 0
			for _, n := range all {
				if n.Reservation == "" && (string(n.ProvisionState) == step[1] && n.TargetProvisionState == "" || strings.HasSuffix(string(n.ProvisionState), "failed")) {
					done++
				}
			}
			if done >= len(uuids) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %d of %d nodes settled after 3 minutes", step[0], done, len(uuids))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// callVerb calls verb on node through the control API until a conductor
// accepts it. The client already retries refusals for 30 s; a verb still
// refused by a concurrency limit after that (conductor.ErrConcurrentActionLimit:
// max_concurrent_deploy / max_concurrent_clean) is called again (the
// refusal changed nothing, and the limit frees up as the fleet's deploys
// and cleans finish) until issueBy. Any other refusal is returned.
func callVerb(ctx context.Context, verbs *clusterlab.VerbClient, node, verb string, issueBy time.Time) error {
	for {
		_, err := verbs.Call(ctx, node, verb, 30*time.Second)
		// The control API names the sentinel a refusal matched, so the
		// client's *clusterlab.VerbError matches it as the conductor's
		// *conductor.ConcurrentActionLimitError did.
		if err == nil || !errors.Is(err, conductor.ErrConcurrentActionLimit) || ctx.Err() != nil {
			return err
		}
		if time.Now().After(issueBy) {
			return fmt.Errorf("%s of %s still waiting for the concurrency limit: %w", verb, node, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func summary(ctx context.Context, store baremetal.Store, lab *clusterlab.Lab, uuids []string, took time.Duration) error {
	states := map[string]int{}
	resumed, failed, waited, finished, restarted := 0, 0, 0, 0, 0
	for _, id := range uuids {
		n, err := store.GetNode(ctx, id)
		if err != nil {
			return err
		}
		states[string(n.ProvisionState)]++
		hs, err := store.ListHistory(ctx, id, 0)
		if err != nil {
			return err
		}
		for _, h := range hs {
			switch {
			case strings.Contains(h.Message, "cannot be resumed"):
				failed++
				fmt.Printf("  %s failed: %s\n", n.Name, n.LastError)
			case h.Event == "takeover" && strings.Contains(h.Message, "resuming"):
				resumed++
			case h.Event == "takeover" && strings.Contains(h.Message, "waiting for the agent"):
				waited++
			case h.Event == "takeover" && strings.Contains(h.Message, "every step had finished"):
				finished++
			case h.Event == "takeover" && strings.Contains(h.Message, "restarting"):
				restarted++
			}
		}
	}
	fmt.Printf("summary after %.1fs: final states %v\n", took.Seconds(), states)
	fmt.Printf("  interrupted by the kill: %d resumed at their step, %d finished (every step had finished), %d restarted (no step had started), %d continued waiting for their agent, %d failed as Ironic would\n",
		resumed, finished, restarted, waited, failed)
	fmt.Printf("  agent requests routed per conductor: %v\n", lab.Routed())
	return nil
}
