package steps

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValidTraitName(t *testing.T) {
	for name, want := range map[string]bool{
		"CUSTOM_RAID1": true, "HW_CPU_X86_VMX": true, "CUSTOM_": false, "custom_raid": false,
		"": false, "1CUSTOM": false, "CUSTOM-RAID": false, "CUSTOM_" + strings.Repeat("A", 248): true,
		"CUSTOM_" + strings.Repeat("A", 249): false,
	} {
		if got := ValidTraitName(name); got != want {
			t.Errorf("ValidTraitName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseTemplate(t *testing.T) {
	got, err := ParseTemplate([]byte(`{"name": "CUSTOM_RAID1", "uuid": "5c8e6f4a-0000-4000-8000-000000000001", "extra": {"owner": "ops"},
		"steps": [{"interface": "raid", "step": "apply_configuration", "args": {"raid_config": {}}, "priority": 150},
		          {"interface": "deploy", "step": "tear_down_agent", "args": {}, "priority": "0"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Template{Name: "CUSTOM_RAID1", Steps: []Step{
		{Interface: "raid", Name: "apply_configuration", Args: map[string]any{"raid_config": map[string]any{}}, Priority: 150},
		{Interface: "deploy", Name: "tear_down_agent", Args: map[string]any{}, Priority: 0},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseTemplate = %+v, want %+v", got, want)
	}
	tests := []struct {
		name  string
		input string
		want  []ParseProblem
	}{
		{"not an object", `[]`, []ParseProblem{{Index: -1, Problem: "want a deploy template object: got a JSON array"}}},
		{"missing everything", `{}`, []ParseProblem{{Index: -1, Field: "name", Problem: "is required"}, {Index: -1, Field: "steps", Problem: "is required"}}},
		{"bad name and no steps", `{"name": "raid1", "steps": [], "owner": "x"}`, []ParseProblem{
			{Index: -1, Field: "owner", Problem: "unexpected key; allowed keys are name, steps, uuid, extra"},
			{Index: -1, Field: "name", Problem: `"raid1" is not a valid trait name (upper-case letters, digits and underscores, e.g. CUSTOM_RAID1)`},
			{Index: -1, Field: "steps", Problem: "must hold at least one step"}}},
		{"bad uuid and extra", `{"name": "CUSTOM_X", "uuid": 1, "extra": [], "steps": [{"interface": "deploy", "step": "x", "args": {}, "priority": 1}]}`, []ParseProblem{
			{Index: -1, Field: "uuid", Problem: "want a string, got a number 1"},
			{Index: -1, Field: "extra", Problem: "want an object, got an array"}}},
		{"bad step", `{"name": "CUSTOM_X", "steps": [{"interface": "deploy", "step": "x"}]}`, []ParseProblem{
			{Index: 0, Field: "args", Problem: "is required for deploy steps"},
			{Index: 0, Field: "priority", Problem: "is required for deploy steps"}}},
		{"duplicates", `{"name": "CUSTOM_X", "steps": [{"interface": "deploy", "step": "x", "args": {}, "priority": 1}, {"interface": "deploy", "step": "x", "args": {}, "priority": 2}]}`, []ParseProblem{
			{Index: -1, Field: "steps", Problem: "Duplicate deploy steps. A deploy template cannot have multiple deploy steps with the same interface and step: deploy.x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTemplate([]byte(tc.input))
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

// FuzzParseTemplate checks that any input gives a template that passes
// the schema or a *ParseError, never a panic.
func FuzzParseTemplate(f *testing.F) {
	f.Add([]byte(`{"name": "CUSTOM_RAID1", "steps": [{"interface": "raid", "step": "apply_configuration", "args": {"raid_config": {}}, "priority": 150}]}`))
	f.Add([]byte(`{"name": "CUSTOM_", "steps": null}`))
	f.Add([]byte(`{"name": "X", "steps": [{}, {}], "extra": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := ParseTemplate(data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v is not a *ParseError with problems", err)
			}
			return
		}
		if !ValidTraitName(tmpl.Name) || len(tmpl.Steps) == 0 || len(duplicateKeys(tmpl.Steps)) > 0 {
			t.Fatalf("accepted an invalid template: %+v", tmpl)
		}
	})
}
