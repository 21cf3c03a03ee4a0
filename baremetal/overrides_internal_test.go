package baremetal

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/steps"
)

// TestPlannerIgnoresBadOverrideKey checks that one override key no clean
// step can have (boot.x) is ignored with a warning naming it, while the
// other keys still apply: erase_devices overridden to 0 leaves automated
// cleaning, as in Ironic. Before, the bad key made the whole
// configuration invalid and the conductor fell back to no overrides.
func TestPlannerIgnoresBadOverrideKey(t *testing.T) {
	var buf bytes.Buffer
	c := &Conductor{
		opts: Options{CleanStepPriorityOverride: map[string]int{"boot.x": 5, "deploy.erase_devices": 0}},
		log:  slog.New(slog.NewTextHandler(&buf, nil)),
	}
	p := c.planner()
	if got := p.Config().CleanPriorityOverrides; len(got) != 1 || got["deploy.erase_devices"] != 0 {
		t.Fatalf("overrides in force = %v, want only deploy.erase_devices:0", got)
	}
	plan, err := p.AutomatedClean(steps.AutomatedCleanRequest{Source: steps.Source{
		Agent:  map[string][]steps.Step{"deploy": {{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true}}},
		Driver: map[string][]steps.Step{},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Steps) != 0 {
		t.Errorf("automated clean = %v, want no steps (erase_devices disabled by its override)", plan.Steps)
	}
	logs := buf.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "key=boot.x") || !strings.Contains(logs, "option=clean_step_priority_override") {
		t.Errorf("logs do not warn about boot.x:\n%s", logs)
	}
	if strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "deploy.erase_devices") {
		t.Errorf("logs report more than the bad key:\n%s", logs)
	}
}
