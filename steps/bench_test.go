package steps

import (
	"fmt"
	"testing"
)

// benchSource returns n steps on each of the seven cleaning interfaces,
// half of them enabled, plus n agent steps on the deploy interface.
func benchSource(n int) Source {
	src := Source{Driver: map[string][]Step{}, Agent: map[string][]Step{}, InBand: []string{"deploy"}}
	for _, iface := range Clean.Interfaces() {
		for i := 0; i < n; i++ {
			src.Driver[iface] = append(src.Driver[iface], Step{Interface: iface, Name: fmt.Sprintf("s%d", i), Priority: (i % 2) * (i % 7) * 10})
		}
	}
	for i := 0; i < n; i++ {
		src.Agent["deploy"] = append(src.Agent["deploy"], Step{Interface: "deploy", Name: fmt.Sprintf("agent%d", i), Priority: i % 3 * 5})
	}
	return src
}

// BenchmarkAutomatedClean measures planning an automated clean from 7
// interfaces with 20 steps each plus 20 agent steps.
func BenchmarkAutomatedClean(b *testing.B) {
	planner, err := NewPlanner(Config{CleanPriorityOverrides: map[string]int{"deploy.s1": 99}})
	if err != nil {
		b.Fatal(err)
	}
	src := benchSource(20)
	var planned int
	for b.Loop() {
		plan, err := planner.AutomatedClean(AutomatedCleanRequest{Source: src})
		if err != nil {
			b.Fatal(err)
		}
		planned = len(plan.Steps)
	}
	b.ReportMetric(float64(planned), "steps/plan")
}

// BenchmarkDeployWithTemplates measures composing a deploy plan with 10
// user steps and two matching templates.
func BenchmarkDeployWithTemplates(b *testing.B) {
	planner, err := NewPlanner(Config{})
	if err != nil {
		b.Fatal(err)
	}
	src := benchSource(20)
	src.Driver["deploy"] = append(src.Driver["deploy"], Step{Interface: "deploy", Name: "deploy", Priority: 100})
	var user []Step
	for i := 0; i < 10; i++ {
		user = append(user, Step{Interface: "bios", Name: fmt.Sprintf("s%d", i), Priority: 150 - i, Args: map[string]any{}})
	}
	templates := []Template{
		{Name: "CUSTOM_A", Steps: []Step{{Interface: "raid", Name: "s3", Priority: 120, Args: map[string]any{}}}},
		{Name: "CUSTOM_B", Steps: []Step{{Interface: "management", Name: "s4", Priority: 0, Args: map[string]any{}}}},
	}
	for b.Loop() {
		if _, err := planner.Deploy(DeployRequest{Source: src, UserSteps: user, Templates: templates, InstanceTraits: []string{"CUSTOM_A", "CUSTOM_B"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideRun measures driving a 50-step run to the end through
// Start and Decide, reporting the cost per decision.
func BenchmarkDecideRun(b *testing.B) {
	planner, err := NewPlanner(Config{})
	if err != nil {
		b.Fatal(err)
	}
	plan, err := planner.AutomatedClean(AutomatedCleanRequest{Source: benchSource(20)})
	if err != nil {
		b.Fatal(err)
	}
	prog := plan.Progress()
	decisions := 0
	for b.Loop() {
		a := planner.Start(prog)
		decisions++
		for a.Kind != Finish {
			a = planner.Decide(a.Progress, Outcome{Kind: StepDone})
			decisions++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(decisions), "ns/decision")
}
