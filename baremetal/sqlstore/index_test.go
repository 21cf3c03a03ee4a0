package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestPeriodicQueriesUseIndexes checks SQLite's plan for the listings the
// periodic tasks run: none may scan the whole nodes table.
func TestPeriodicQueriesUseIndexes(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "idx.db"), nil)
	ctx := context.Background()
	nodes := make([]*baremetal.Node, 500)
	for i := range nodes {
		nodes[i] = &baremetal.Node{Name: fmt.Sprintf("i%d", i), ProvisionState: []statemachine.State{"available", "active", "clean wait", "deploying"}[i%4]}
	}
	if err := s.CreateNodes(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]baremetal.NodeFilter{
		"by state":           {ProvisionStates: []statemachine.State{"available"}},
		"callback timeout":   {ProvisionStates: []statemachine.State{"clean wait"}, ProvisionUpdatedBefore: time.Now()},
		"orphans":            {ReservedBy: "conductor-9"},
		"stuck at start":     {ProvisionStates: []statemachine.State{"deploying", "cleaning"}, Reserved: new(false)},
		"state, deep page":   {ProvisionStates: []statemachine.State{"active"}},
		"group and driver":   {ConductorGroup: new("rack-1"), Drivers: []string{"ipmi"}},
		"maintenance sweeps": {Maintenance: new(true)},
	} {
		page := baremetal.Page{Limit: 100}
		if name == "state, deep page" {
			page.Marker = nodes[250].UUID
		}
		plan, err := sqlstore.ExplainListForTest(ctx, s, f, page)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(plan, "SCAN nodes") && !strings.Contains(plan, "USING") {
			t.Errorf("%s: full table scan: %s", name, plan)
		}
		t.Logf("%s: %s", name, plan)
	}
}
