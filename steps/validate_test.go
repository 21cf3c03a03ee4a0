package steps

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestPyRepr(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, "None"},
		{true, "True"},
		{false, "False"},
		{"it's", `"it's"`},
		{`a'b"c`, `'a\'b"c'`},
		{"tab\there\n\x01", `'tab\there\n\x01'`},
		{3.0, "3"},
		{2.5, "2.5"},
		{1e20, "100000000000000000000"},
		{json.Number("9007199254740993"), "9007199254740993"},
		{json.Number("1.0"), "1.0"},
		{json.Number("2.50"), "2.5"},
		{json.Number("1e20"), "1e+20"},
		{json.Number("1e16"), "1e+16"},
		{json.Number("1e15"), "1000000000000000.0"},
		{json.Number("1e-5"), "1e-05"},
		{json.Number("0.0001"), "0.0001"},
		{json.Number("-0"), "0"},
		{7, "7"},
		{int64(-8), "-8"},
		{[]any{1.0, "x", nil}, "[1, 'x', None]"},
		{map[string]any{"b": 1.0, "a": []any{}}, "{'a': [], 'b': 1}"},
	}
	for _, tc := range tests {
		var b strings.Builder
		writePyRepr(&b, tc.in)
		if b.String() != tc.want {
			t.Errorf("repr(%#v) = %s, want %s", tc.in, b.String(), tc.want)
		}
	}
}

func TestValidateUserStepsDirect(t *testing.T) {
	available := []Step{
		MustDeclare(Deploy, "deploy", "deploy", 100),
		MustDeclare(Deploy, "raid", "apply_configuration", 0, WithArgsInfo(map[string]ArgInfo{"raid_config": {Description: "config", Required: true}})),
	}
	res, err := ValidateUserSteps(Deploy, []Step{
		{Interface: "deploy", Name: "deploy", Priority: 0, Args: map[string]any{}},
		{Interface: "raid", Name: "apply_configuration", Priority: 0, Args: map[string]any{}},
		{Interface: "power", Name: "power_off", Priority: 45},
	}, available, ValidateOptions{})
	if err != nil {
		t.Fatalf("disabling steps with priority 0 needs no arguments: %v", err)
	}
	if len(res.Steps) != 3 || res.Steps[2].Name != "power_off" || res.NeedsRamdisk {
		t.Fatalf("result = %+v", res)
	}
	_, err = ValidateUserSteps(Deploy, []Step{
		{Interface: "raid", Name: "apply_configuration", Priority: 10, Args: map[string]any{}},
		{Interface: "raid", Name: "apply_configuration", Priority: 20, Args: map[string]any{"raid_config": map[string]any{}}},
	}, available, ValidateOptions{Origin: OriginTemplate})
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidSteps) || errors.Is(err, ErrStepNotAllowed) {
		t.Fatalf("error = %v", err)
	}
	if !ve.Has(ProblemMissingArgs) || !ve.Has(ProblemDuplicates) || ve.Has(ProblemCoreStep) {
		t.Fatalf("problems = %+v", ve.Problems)
	}
	const wantMsg = "Validation of deploy steps from deploy templates matching this node's instance traits failed. Matching deploy templates: . Errors: " +
		"deploy step {'interface': 'raid', 'step': 'apply_configuration', 'args': {}, 'priority': 10} is missing these required arguments: raid_config (config); " +
		"deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for raid.apply_configuration"
	if ve.Message() != wantMsg {
		t.Fatalf("message =\n%s\nwant\n%s", ve.Message(), wantMsg)
	}
	if ve.Error() != "steps: "+wantMsg {
		t.Fatalf("Error() lacks the component prefix: %s", ve.Error())
	}
}

func TestValidationDoesNotAlias(t *testing.T) {
	args := map[string]any{"settings": []any{"x"}}
	user := []Step{{Interface: "bios", Name: "apply_configuration", Args: args}}
	available := []Step{MustDeclare(Clean, "bios", "apply_configuration", 0, WithArgsInfo(map[string]ArgInfo{"settings": {Description: "s"}}))}
	res, err := ValidateUserSteps(Clean, user, available, ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res.Steps[0].Args["settings"].([]any)[0] = "changed"
	if args["settings"].([]any)[0] != "x" {
		t.Fatal("validated steps share argument memory with the request")
	}
}

func TestGatherDoesNotAlias(t *testing.T) {
	driver := map[string][]Step{"deploy": {{Interface: "deploy", Name: "a", Priority: 1, Args: map[string]any{"k": "v"}}}}
	got := Gather(Clean, Source{Driver: driver}, GatherOptions{Overrides: map[string]int{"deploy.a": 50}})
	got[0].Args["k"] = "changed"
	if driver["deploy"][0].Args["k"] != "v" || driver["deploy"][0].Priority != 1 {
		t.Fatal("Gather modified the source")
	}
}
