// Command outagebench measures how a conductor comes through PostgreSQL
// outages. It creates a schema of its own in the database of -db (the
// server is never stopped), puts a faultlab proxy between the conductor
// and it, enrolls -nodes fake-hardware nodes and makes them available,
// and then, for each cut length of -cuts, deploys every node and cuts
// the proxy -after into the deploys, then undeploys every node and cuts
// it again the same way. For each cut it prints how long after the
// database's return the first read and the first write succeeded, how
// long until every node was in a stable or failure state with no
// reservation (the recovery time), the slowest call during the cut, and
// the nodes' final states, beside the same fleet's deploy and undeploy
// with the database up (the baseline of the run) and the machine's load
// average.
//
// It exits 1 when a fleet did not settle within -bound of the return
// or writes came back more than 2 s after reads (.ci/run runs it with
// ANVIL_CI_OUTAGE_BENCH=1).
//
//	go run ./examples/outagebench -db postgres://postgres@127.0.0.1:5432/test?sslmode=disable [-nodes 300] [-cuts 5s,20s,40s] [-after 2s] [-delay 30ms] [-bound 30s] [-v]
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/internal/faultlab"
	"github.com/anvilmetal/anvil/statemachine"
	_ "github.com/jackc/pgx/v5/stdlib"
)

type cutReport struct {
	Verb         string            `json:"verb"`
	CutS         float64           `json:"cut_s"`
	ReadAfterS   float64           `json:"read_after_s"`
	WriteAfterS  float64           `json:"write_after_s"`
	RecoveredS   float64           `json:"recovered_s"`
	SlowestCallS float64           `json:"slowest_call_during_cut_s"`
	SlowestVerbS float64           `json:"slowest_verb_s"`
	VerbErrors   int               `json:"verbs_refused"`
	States       map[string]int    `json:"states"`
	Failed       map[string]string `json:"failed,omitempty"`
	Stuck        []string          `json:"stuck,omitempty"`
	LoadAvg      string            `json:"loadavg"`
}

type report struct {
	Nodes             int         `json:"nodes"`
	DeployBaselineS   float64     `json:"deploy_baseline_s"`
	UndeployBaselineS float64     `json:"undeploy_baseline_s"`
	Cuts              []cutReport `json:"cuts"`
}

func main() {
	dsn := flag.String("db", os.Getenv("ANVIL_TEST_POSTGRES_DSN"), "PostgreSQL DSN (postgres:// URL); a schema of the run's own is created in it and dropped after")
	nodes := flag.Int("nodes", 300, "nodes")
	cuts := flag.String("cuts", "5s,20s,40s", "cut lengths, comma-separated")
	after := flag.Duration("after", 2*time.Second, "time from the verbs' start to the cut")
	delay := flag.Duration("delay", 30*time.Millisecond, "time every fake operation takes")
	bound := flag.Duration("bound", 30*time.Second, "exit 1 when a cut's fleet is not settled with no reservation within this time of the database's return, or writes resume more than 2 s after reads")
	verbose := flag.Bool("v", false, "log the conductor's warnings to stderr")
	flag.Parse()
	if *dsn == "" {
		fail(fmt.Errorf("-db (or ANVIL_TEST_POSTGRES_DSN) is required"))
	}
	var lengths []time.Duration
	for _, s := range strings.Split(*cuts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			fail(fmt.Errorf("-cuts: %w", err))
		}
		lengths = append(lengths, d)
	}
	ctx := context.Background()
	schemaDSN, drop := ownSchema(ctx, *dsn)
	defer drop()
	var log *slog.Logger
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	f, stop, err := faultlab.StartFleet(ctx, faultlab.FleetConfig{DSN: schemaDSN, Nodes: *nodes, Delay: *delay, Logger: log})
	if err != nil {
		fail(err)
	}
	defer stop()
	c := f.Conductor
	deploy := func(ctx context.Context, u string) error { return c.Deploy(ctx, u, conductor.DeployOptions{}) }
	rep := report{Nodes: *nodes}
	d, err := faultlab.Drive(ctx, f, f.Nodes, statemachine.Active, deploy)
	if err != nil {
		fail(err)
	}
	rep.DeployBaselineS = d.Seconds()
	d, err = faultlab.Drive(ctx, f, f.Nodes, statemachine.Available, c.Undeploy)
	if err != nil {
		fail(err)
	}
	rep.UndeployBaselineS = d.Seconds()
	for _, length := range lengths {
		for _, v := range []struct {
			name string
			fn   func(context.Context, string) error
		}{{"deploy", deploy}, {"undeploy", c.Undeploy}} {
			// Every node starts from the verb's starting state; a node
			// an earlier cut left failed is brought back first.
			if err := reset(ctx, f, v.name); err != nil {
				fail(err)
			}
			r, err := faultlab.Run(ctx, f, faultlab.Cut{Verb: v.fn, After: *after, Length: length, Settle: 3 * time.Minute})
			if err != nil {
				fail(err)
			}
			lavg, _ := os.ReadFile("/proc/loadavg")
			cr := cutReport{Verb: v.name, CutS: r.Cut.Seconds(), ReadAfterS: r.ReadAfter.Seconds(), WriteAfterS: r.WriteAfter.Seconds(),
				RecoveredS: r.Recovered.Seconds(), SlowestCallS: r.SlowestCall.Seconds(), SlowestVerbS: r.SlowestVerb.Seconds(), VerbErrors: r.VerbErrors,
				States: r.States, Failed: r.Failed, Stuck: r.Stuck, LoadAvg: strings.TrimSpace(string(lavg))}
			rep.Cuts = append(rep.Cuts, cr)
			fmt.Fprintf(os.Stderr, "outagebench: %s, %v cut: reads after %v, writes after %v, settled after %v, states %v\n",
				v.name, r.Cut.Round(time.Millisecond), r.ReadAfter.Round(time.Millisecond), r.WriteAfter.Round(time.Millisecond), r.Recovered.Round(time.Millisecond), r.States)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fail(err)
	}
	for _, cr := range rep.Cuts {
		if len(cr.Stuck) > 0 || cr.RecoveredS > bound.Seconds() || cr.WriteAfterS > cr.ReadAfterS+2 {
			fail(fmt.Errorf("%s with a %.0f s cut: %d nodes stuck, settled after %.1f s (bound %v), writes %.1f s after the return, reads %.1f s",
				cr.Verb, cr.CutS, len(cr.Stuck), cr.RecoveredS, *bound, cr.WriteAfterS, cr.ReadAfterS))
		}
	}
}

// reset brings every node to the state verb starts from: available for
// deploy, active for undeploy (failed nodes through Ironic's verbs).
func reset(ctx context.Context, f faultlab.Fleet, verb string) error {
	c := f.Conductor
	deploy := func(ctx context.Context, u string) error { return c.Deploy(ctx, u, conductor.DeployOptions{}) }
	var toAvail, toActive []string
	for _, u := range f.Nodes {
		n, err := f.Store.GetNode(ctx, u)
		if err != nil {
			return err
		}
		switch {
		case verb == "deploy" && n.ProvisionState != statemachine.Available:
			toAvail = append(toAvail, u)
		case verb == "undeploy" && n.ProvisionState != statemachine.Active:
			if n.ProvisionState != statemachine.Available {
				toAvail = append(toAvail, u)
			}
			toActive = append(toActive, u)
		}
	}
	if len(toAvail) > 0 {
		// deploy failed, clean failed and error all undeploy (deleted)
		// or manage then provide; active undeploys.
		if _, err := faultlab.Drive(ctx, f, toAvail, statemachine.Available, func(ctx context.Context, u string) error {
			n, err := f.Store.GetNode(ctx, u)
			if err != nil {
				return err
			}
			if n.ProvisionState == statemachine.CleanFailed {
				if err := c.Manage(ctx, u); err != nil {
					return err
				}
				for {
					m, err := f.Store.GetNode(ctx, u)
					if err != nil {
						return err
					}
					if m.ProvisionState == statemachine.Manageable && m.Reservation == "" {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				return c.Provide(ctx, u)
			}
			return c.Undeploy(ctx, u)
		}); err != nil {
			return err
		}
	}
	if len(toActive) > 0 {
		if _, err := faultlab.Drive(ctx, f, toActive, statemachine.Active, deploy); err != nil {
			return err
		}
	}
	return nil
}

// ownSchema creates a schema of the run's own in the database of dsn
// and returns a DSN using it, and the function dropping it.
func ownSchema(ctx context.Context, dsn string) (string, func()) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		fail(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "anvil_outagebench_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		fail(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		fail(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		_, _ = db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = db.Close()
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "outagebench:", err)
	os.Exit(1)
}
