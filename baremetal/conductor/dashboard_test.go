package conductor_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/netboot"
)

// dashboardFile is the Grafana dashboard of the conductor's metrics.
var dashboardFile = filepath.Join("..", "..", "docs", "grafana", "anvil-conductor.json")

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descVar    = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	metricRef  = regexp.MustCompile(`\b(anvil_[a-z_]+)(\{[^}]*\})?`)
	byClause   = regexp.MustCompile(`\bby \(([^)]*)\)`)
	matcherKey = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
)

// metricLabels returns every metric the conductor (lone and in a
// cluster) and the boot server register, with its label names.
func metricLabels(t *testing.T) map[string][]string {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	c, err := conductor.New(sqlstoretest.OpenSQLite(t, clock.System()), reg, conductor.Options{Hostname: "dash", Logger: slog.New(slog.DiscardHandler),
		Cluster: &conductor.ClusterOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's collectors exist once the conductor runs.
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	boot, err := netboot.New(netboot.Options{HTTPBase: "http://192.0.2.1:8080", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cols := append([]prometheus.Collector{c.Metrics()}, c.ClusterCollectors()...)
	cols = append(cols, boot.Collectors()...)
	if len(c.ClusterCollectors()) == 0 {
		t.Fatal("a cluster conductor offers no cluster collectors")
	}
	out := map[string][]string{}
	ch := make(chan *prometheus.Desc, 256)
	for _, col := range cols {
		col.Describe(ch)
	}
	close(ch)
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("cannot read the metric name of %s", s)
		}
		var labels []string
		if cl := descConst.FindStringSubmatch(s); cl != nil {
			for kv := range strings.SplitSeq(cl[1], ",") {
				if k, _, ok := strings.Cut(kv, "="); ok {
					labels = append(labels, strings.TrimSpace(k))
				}
			}
		}
		if vl := descVar.FindStringSubmatch(s); vl != nil {
			for k := range strings.SplitSeq(vl[1], ",") {
				if k = strings.TrimSpace(k); k != "" {
					labels = append(labels, k)
				}
			}
		}
		out[m[1]] = labels
	}
	return out
}

// TestGrafanaDashboard checks the dashboard is valid JSON a Grafana
// imports (uid, title, panels with unique ids, each query on a
// Prometheus datasource) and that every query names metrics the
// conductor, the ring and the boot server register, with labels they
// have; and that every conductor metric is on some panel.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr       string `json:"expr"`
				RefID      string `json:"refId"`
				Datasource struct {
					Type string `json:"type"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without uid, title, schemaVersion or panels: %q %q %d %d", dash.UID, dash.Title, dash.SchemaVersion, len(dash.Panels))
	}
	known := metricLabels(t)
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d (%q) has no title or no query", p.ID, p.Title)
		}
		for _, q := range p.Targets {
			if q.Datasource.Type != "prometheus" || q.RefID == "" {
				t.Errorf("panel %q: query %q without a Prometheus datasource or refId", p.Title, q.Expr)
			}
			refs := metricRef.FindAllStringSubmatch(q.Expr, -1)
			if len(refs) == 0 {
				t.Errorf("panel %q: query %q names no anvil metric", p.Title, q.Expr)
			}
			var labels []string
			for _, r := range refs {
				name := r[1]
				if _, ok := known[name]; !ok {
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if base, cut := strings.CutSuffix(name, suffix); cut {
							if _, ok := known[base]; ok {
								name = base
								if suffix == "_bucket" {
									labels = append(labels, "le")
								}
							}
						}
					}
				}
				ls, ok := known[name]
				if !ok {
					t.Errorf("panel %q: metric %s is not registered by the conductor, ring or boot server", p.Title, r[1])
					continue
				}
				used[name] = true
				labels = append(labels, ls...)
				for _, m := range matcherKey.FindAllStringSubmatch(r[2], -1) {
					if !slices.Contains(ls, m[1]) {
						t.Errorf("panel %q: %s has no label %s", p.Title, name, m[1])
					}
				}
			}
			for _, by := range byClause.FindAllStringSubmatch(q.Expr, -1) {
				for l := range strings.SplitSeq(by[1], ",") {
					if l = strings.TrimSpace(l); !slices.Contains(labels, l) {
						t.Errorf("panel %q: grouping by %s, which no metric of %q has", p.Title, l, q.Expr)
					}
				}
			}
		}
	}
	for name := range known {
		if strings.HasPrefix(name, "anvil_conductor_") && !used[name] {
			t.Errorf("metric %s is on no panel", name)
		}
	}
}
