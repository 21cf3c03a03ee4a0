package steps

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// scenario is one golden planning case: a node's steps, the operator
// configuration and a request, read from testdata/plans/<name>.json. The
// expected plan or errors are in <name>.golden.
type scenario struct {
	Description        string          `json:"description"`
	Operation          string          `json:"operation"`
	Config             Config          `json:"config"`
	Source             Source          `json:"source"`
	NodeAutomatedClean *bool           `json:"node_automated_clean"`
	Runbook            *Runbook        `json:"runbook"`
	UserSteps          json.RawMessage `json:"user_steps"`
	DisableRamdisk     bool            `json:"disable_ramdisk"`
	SkipMissing        bool            `json:"skip_missing"`
	Templates          []Template      `json:"templates"`
	InstanceTraits     []string        `json:"instance_traits"`
}

func runScenario(sc scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", sc.Description)
	fmt.Fprintf(&b, "operation: %s\n", sc.Operation)
	planner, err := NewPlanner(sc.Config)
	if err != nil {
		fmt.Fprintf(&b, "config error: %v\n", err)
		return b.String()
	}
	for _, ig := range planner.Ignored() {
		fmt.Fprintf(&b, "ignored: %s key %q: %s\n", ig.Option, ig.Key, ig.Reason)
	}
	var user []Step
	if len(sc.UserSteps) > 0 {
		kind := Clean
		switch sc.Operation {
		case "deploy":
			kind = Deploy
		case "service":
			kind = Service
		}
		user, err = ParseUserSteps(kind, sc.UserSteps)
		if err != nil {
			renderError(&b, err)
			return b.String()
		}
	}
	var plan Plan
	switch sc.Operation {
	case "automated_clean":
		plan, err = planner.AutomatedClean(AutomatedCleanRequest{Source: sc.Source, NodeAutomatedClean: sc.NodeAutomatedClean, Runbook: sc.Runbook})
	case "manual_clean":
		plan, err = planner.ManualClean(ManualRequest{Source: sc.Source, Steps: user, DisableRamdisk: sc.DisableRamdisk, SkipMissing: sc.SkipMissing})
	case "service":
		plan, err = planner.Service(ManualRequest{Source: sc.Source, Steps: user, DisableRamdisk: sc.DisableRamdisk, SkipMissing: sc.SkipMissing})
	case "deploy":
		plan, err = planner.Deploy(DeployRequest{Source: sc.Source, UserSteps: user, Templates: sc.Templates, InstanceTraits: sc.InstanceTraits, SkipMissing: sc.SkipMissing})
	case "verify":
		plan = planner.Verify(sc.Source)
	default:
		err = fmt.Errorf("unknown operation %q", sc.Operation)
	}
	if err != nil {
		renderError(&b, err)
		return b.String()
	}
	renderPlan(&b, plan)
	return b.String()
}

func renderPlan(b *strings.Builder, plan Plan) {
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{plan.Skip, "skip"}, {plan.Manual, "manual"}, {plan.DisableRamdisk, "disable_ramdisk"},
		{plan.Declarative, "declarative"}, {plan.NeedsRamdisk, "needs_ramdisk"}, {plan.StepsValidated, "steps_validated"},
	} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	fmt.Fprintf(b, "plan: %s [%s]\n", plan.Kind, strings.Join(flags, " "))
	for i, s := range plan.Steps {
		fmt.Fprintf(b, "  %d. %s\n", i, renderStep(s))
	}
	for _, s := range plan.Skipped {
		fmt.Fprintf(b, "  skipped (not known yet): %s\n", renderStep(s))
	}
	if len(plan.UserSteps) > 0 {
		fmt.Fprintf(b, "user_deploy_steps: %d\n", len(plan.UserSteps))
	}
}

func renderStep(s Step) string {
	parts := []string{s.Key(), fmt.Sprintf("priority=%d", s.Priority)}
	if s.Abortable {
		parts = append(parts, "abortable")
	}
	if s.RequiresRamdisk {
		parts = append(parts, "requires_ramdisk")
	}
	if s.RebootRequested {
		parts = append(parts, "reboot_requested")
	}
	if s.ExecuteOnChildNodes {
		parts = append(parts, "on_child_nodes")
	}
	if s.Args != nil {
		var args strings.Builder
		writePyRepr(&args, s.Args)
		parts = append(parts, "args="+args.String())
	}
	if len(s.ArgsInfo) > 0 {
		parts = append(parts, "argsinfo="+strings.Join(sortedArgNames(s.ArgsInfo), ","))
	}
	return strings.Join(parts, " ")
}

func renderError(b *strings.Builder, err error) {
	fmt.Fprintf(b, "error: %v\n", err)
	var sentinels []string
	for _, s := range []struct {
		err  error
		name string
	}{
		{ErrInvalidSteps, "ErrInvalidSteps"}, {ErrStepNotAllowed, "ErrStepNotAllowed"},
		{ErrNoDeploySteps, "ErrNoDeploySteps"}, {ErrInvalidStepList, "ErrInvalidStepList"},
		{ErrInvalidConfig, "ErrInvalidConfig"},
	} {
		if errors.Is(err, s.err) {
			sentinels = append(sentinels, s.name)
		}
	}
	fmt.Fprintf(b, "matches: %s\n", strings.Join(sentinels, " "))
	var ve *ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			step := "-"
			if !p.Step.IsZero() {
				step = p.Step.Key()
			}
			fmt.Fprintf(b, "  problem %s (%s) %s names=%v\n", p.Code, p.Origin, step, p.Names)
		}
	}
	var pe *ParseError
	if errors.As(err, &pe) {
		for _, p := range pe.Problems {
			fmt.Fprintf(b, "  parse problem index=%d field=%q: %s\n", p.Index, p.Field, p.Problem)
		}
	}
}

func TestGoldenPlans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "plans", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios under testdata/plans")
	}
	sort.Strings(files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var sc scenario
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&sc); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got := runScenario(sc)
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenPlans -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s (rerun with -update and review the diff)\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}
