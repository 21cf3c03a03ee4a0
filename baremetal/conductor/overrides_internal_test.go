package conductor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/steps"
)

// TestPlannerIgnoresBadOverrideKey checks that one override key no clean
// step can have (boot.x) is ignored with a warning naming it, while the
// other keys still apply: erase_devices overridden to 0 leaves automated
// cleaning, as in Ironic. Before, the bad key made the whole
// configuration invalid and the conductor fell back to no overrides.
func TestPlannerIgnoresBadOverrideKey(t *testing.T) {
	t.Parallel()
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

// agentRAID is a RAID implementation that says it is agent-based, as
// Ironic's agent RAID interface is.
type agentRAID struct{ *fake.RAID }

func (agentRAID) AgentBased() bool { return true }

// TestStepSourceInBand checks that the conductor tells the planner which
// interfaces are agent-based, so that the agent's RAID steps are read only
// with an agent RAID interface (Ironic's rule): with the direct deploy
// interface and the fake RAID interface the agent's raid step is not
// planned, with an agent-based RAID interface it is.
func TestStepSourceInBand(t *testing.T) {
	t.Parallel()
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {agentdeploy.Name, fake.Name},
			driver.KindRAID:   {fake.Name, "agent"},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindRAID, "agent", agentRAID{fake.NewRAID(fake.Config{})}); err != nil {
		t.Fatal(err)
	}
	c := &Conductor{drivers: reg}
	for _, tc := range []struct {
		raid       string
		wantInBand string
		wantRAID   bool
	}{
		{fake.Name, "deploy", false},
		{"agent", "deploy,raid", true},
	} {
		n := &baremetal.Node{UUID: "n1", Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name, RAIDInterface: tc.raid,
			DriverInternalInfo: map[string]any{}}
		if err := steps.WriteAgentCache(steps.Clean, n.DriverInternalInfo, map[string][]steps.Step{
			"deploy": {{Interface: "deploy", Name: "erase_devices", Priority: 10}},
			"raid":   {{Interface: "raid", Name: "delete_configuration", Priority: 30}},
		}, "2026-01-01T00:00:00"); err != nil {
			t.Fatal(err)
		}
		src, err := c.stepSource(context.Background(), &task{c: c, node: n}, steps.Clean)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(src.InBand, ","); got != tc.wantInBand {
			t.Errorf("raid %s: in-band interfaces %q, want %q", tc.raid, got, tc.wantInBand)
		}
		gotRAID := false
		for _, s := range steps.Gather(steps.Clean, src, steps.GatherOptions{EnabledOnly: true}) {
			gotRAID = gotRAID || s.Key() == "raid.delete_configuration"
		}
		if gotRAID != tc.wantRAID {
			t.Errorf("raid %s: agent raid step planned = %v, want %v", tc.raid, gotRAID, tc.wantRAID)
		}
	}
}
