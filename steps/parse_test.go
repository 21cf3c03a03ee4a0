package steps

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestParseUserSteps(t *testing.T) {
	got, err := ParseUserSteps(Clean, []byte(`[
		{"interface": "deploy", "step": "erase_devices_metadata"},
		{"interface": "bios", "step": "apply_configuration", "args": {"settings": [{"name": "A", "value": 1}]}},
		{"interface": "management", "step": "clear_job_queue", "execute_on_child_nodes": true, "limit_child_node_execution": ["c1"]}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Interface: "deploy", Name: "erase_devices_metadata"},
		{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "A", "value": 1.0}}}},
		{Interface: "management", Name: "clear_job_queue", ExecuteOnChildNodes: true, LimitChildNodeExecution: []string{"c1"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseUserSteps = %+v, want %+v", got, want)
	}
	got, err = ParseUserSteps(Deploy, []byte(`[{"interface": "bios", "step": "apply_configuration", "args": {}, "priority": "150"},
		{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]`))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Priority != 150 || got[1].Priority != 0 || got[0].Args == nil {
		t.Fatalf("deploy steps = %+v", got)
	}
	if got, err := ParseUserSteps(Service, []byte(" [] ")); err != nil || len(got) != 0 {
		t.Fatalf("empty list = %v, %v", got, err)
	}
}

func TestParseUserStepsErrors(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		input string
		want  []ParseProblem
	}{
		{"not JSON", Clean, `[{`, []ParseProblem{{Index: -1, Problem: "want a JSON array of step objects: malformed JSON at byte 2: unexpected end of JSON input"}}},
		{"null", Clean, `null`, []ParseProblem{{Index: -1, Problem: "want a JSON array of step objects, got null"}}},
		{"object", Clean, `{"interface": "deploy"}`, []ParseProblem{{Index: -1, Problem: "want a JSON array of step objects: got a JSON object"}}},
		{"trailing data", Clean, `[] []`, []ParseProblem{{Index: -1, Problem: "want a JSON array of step objects: malformed JSON at byte 4: invalid character '[' after top-level value"}}},
		{"verify kind", Verify, `[]`, []ParseProblem{{Index: -1, Problem: `user steps of kind "verify" are not accepted`}}},
		{"null item", Clean, `[null]`, []ParseProblem{{Index: 0, Problem: "want an object, got null"}}},
		{"null fields", Clean, `[{"interface": null, "step": null, "args": null}]`, []ParseProblem{
			{Index: 0, Field: "interface", Problem: "want a string, got null"},
			{Index: 0, Field: "step", Problem: "want a string, got null"},
			{Index: 0, Field: "args", Problem: "want an object, got null"}}},
		{"child fields wrong type", Service, `[{"interface": "deploy", "step": "x", "execute_on_child_nodes": "yes", "limit_child_node_execution": [1]}]`, []ParseProblem{
			{Index: 0, Field: "execute_on_child_nodes", Problem: "want a boolean, got a string"},
			{Index: 0, Field: "limit_child_node_execution", Problem: "want an array of strings, got an array"}}},
		{"child fields refused for deploy", Deploy, `[{"interface": "deploy", "step": "x", "args": {}, "priority": 1, "execute_on_child_nodes": true}]`, []ParseProblem{
			{Index: 0, Field: "execute_on_child_nodes", Problem: "unexpected key; allowed keys are interface, step, args, priority"}}},
		{"priority too large", Deploy, `[{"interface": "deploy", "step": "x", "args": {}, "priority": 99999999999}]`, []ParseProblem{
			{Index: 0, Field: "priority", Problem: "want a non-negative integer, got a number 99999999999"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseUserSteps(tc.kind, []byte(tc.input))
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidStepList) {
				t.Fatalf("error = %v, want *ParseError", err)
			}
			if !reflect.DeepEqual(pe.Problems, tc.want) {
				t.Fatalf("problems = %#v\nwant %#v", pe.Problems, tc.want)
			}
		})
	}
}

// FuzzParseUserSteps feeds arbitrary bytes to the parser as the API would
// receive them: it must either return steps that satisfy the schema or a
// *ParseError, and never panic. Accepted lists are then validated and
// planned to exercise the rest of the pipeline on them.
func FuzzParseUserSteps(f *testing.F) {
	seeds := []string{
		`[]`,
		`[{"interface": "deploy", "step": "erase_devices"}]`,
		`[{"interface": "bios", "step": "apply_configuration", "args": {"settings": [{"name": "A", "value": "B"}]}}]`,
		`[{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]`,
		`[{"interface": "raid", "step": "apply_configuration", "args": {"raid_config": {}}, "priority": "150"}]`,
		`[{"interface": "power", "step": "wait", "args": {"seconds": 1e400}}]`,
		`[{"interface": "deploy", "step": "x", "execute_on_child_nodes": true, "limit_child_node_execution": ["a"]}]`,
		`[null, 1, "x", [], {}]`,
		`{"interface": "deploy"}`,
		`[{"interface": "deploy", "step": "", "priority": -1, "args": []}]`,
		"[{\"interface\": \"deploy\", \"step\": \"\\u0000\"}]",
		`[{`,
	}
	for _, s := range seeds {
		for _, k := range []byte{0, 1, 2} {
			f.Add(k, []byte(s))
		}
	}
	planner, err := NewPlanner(Config{})
	if err != nil {
		f.Fatal(err)
	}
	kinds := []Kind{Clean, Deploy, Service}
	driver := map[string][]Step{
		"deploy": {
			MustDeclare(Deploy, "deploy", "deploy", 100),
			MustDeclare(Clean, "deploy", "erase_devices", 10),
		},
		"bios": {MustDeclare(Clean, "bios", "apply_configuration", 0, WithArgsInfo(map[string]ArgInfo{"settings": {Description: "settings", Required: true}}))},
	}
	f.Fuzz(func(t *testing.T, k byte, data []byte) {
		kind := kinds[int(k)%len(kinds)]
		got, err := ParseUserSteps(kind, data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 || !errors.Is(err, ErrInvalidStepList) {
				t.Fatalf("error %v is not a *ParseError with problems", err)
			}
			if got != nil {
				t.Fatalf("steps returned with an error")
			}
			_ = err.Error()
			return
		}
		for i, s := range got {
			if s.Name == "" || !containsString(kind.userInterfaces(), s.Interface) || s.Priority < 0 {
				t.Fatalf("step %d accepted against the schema: %+v", i, s)
			}
			if kind == Deploy && s.Args == nil {
				t.Fatalf("deploy step %d accepted without args", i)
			}
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatalf("accepted steps do not marshal: %v", err)
		}
		src := Source{Driver: driver}
		var perr error
		switch kind {
		case Clean:
			_, perr = planner.ManualClean(ManualRequest{Source: src, Steps: got})
		case Service:
			_, perr = planner.Service(ManualRequest{Source: src, Steps: got})
		case Deploy:
			_, perr = planner.Deploy(DeployRequest{Source: src, UserSteps: got})
		}
		if perr != nil && !errors.Is(perr, ErrInvalidSteps) && !errors.Is(perr, ErrNoDeploySteps) {
			t.Fatalf("planning error %v has no sentinel", perr)
		}
	})
}
