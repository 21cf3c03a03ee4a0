package steps

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDeclareDefaults(t *testing.T) {
	info := map[string]ArgInfo{"force": {Description: "force it", Required: true}}
	tests := []struct {
		name string
		kind Kind
		opts []Option
		want Step
	}{
		{"clean", Clean, nil, Step{Interface: "deploy", Name: "s", Priority: 5, Abortable: false, RequiresRamdisk: true}},
		{"clean out of band", Clean, []Option{WithRequiresRamdisk(false), WithAbortable(true)}, Step{Interface: "deploy", Name: "s", Priority: 5, Abortable: true}},
		{"deploy", Deploy, []Option{WithArgsInfo(info)}, Step{Interface: "deploy", Name: "s", Priority: 5, Abortable: true, ArgsInfo: info}},
		{"deploy not abortable", Deploy, []Option{WithAbortable(false)}, Step{Interface: "deploy", Name: "s", Priority: 5}},
		{"service", Service, nil, Step{Interface: "deploy", Name: "s", Priority: 5, RequiresRamdisk: true}},
		{"verify", Verify, nil, Step{Interface: "deploy", Name: "s", Priority: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Declare(tc.kind, "deploy", "s", 5, tc.opts...)
			if err != nil {
				t.Fatalf("Declare: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Declare = %+v, want %+v", got, tc.want)
			}
		})
	}
	if s, err := Declare(Clean, "raid", "delete", -10); err != nil || s.Priority != -10 {
		t.Fatalf("clean steps accept any priority: %+v %v", s, err)
	}
}

func TestDeclareRejects(t *testing.T) {
	tests := []struct {
		name      string
		kind      Kind
		iface     string
		step      string
		priority  int
		opts      []Option
		wantField string
	}{
		{"unknown kind", Kind("rescue"), "deploy", "s", 1, nil, "kind"},
		{"boot has no clean steps", Clean, "boot", "s", 1, nil, "interface"},
		{"network has no deploy steps", Deploy, "network", "s", 1, nil, "interface"},
		{"empty name", Clean, "deploy", "", 1, nil, "step"},
		{"name not identifier", Clean, "deploy", "erase devices", 1, nil, "step"},
		{"reserved name", Clean, "power", "reboot", 1, nil, "step"},
		{"negative deploy priority", Deploy, "deploy", "s", -1, nil, "priority"},
		{"negative verify priority", Verify, "power", "s", -1, nil, "priority"},
		{"argsinfo without description", Clean, "deploy", "s", 1, []Option{WithArgsInfo(map[string]ArgInfo{"x": {Required: true}})}, "argsinfo.x"},
		{"argsinfo empty name", Clean, "deploy", "s", 1, []Option{WithArgsInfo(map[string]ArgInfo{"": {Description: "d"}})}, "argsinfo"},
		{"verify argsinfo", Verify, "power", "s", 1, []Option{WithArgsInfo(map[string]ArgInfo{"x": {Description: "d"}})}, "argsinfo"},
		{"verify abortable", Verify, "power", "s", 1, []Option{WithAbortable(true)}, "abortable"},
		{"deploy requires_ramdisk", Deploy, "deploy", "s", 1, []Option{WithRequiresRamdisk(true)}, "requires_ramdisk"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Declare(tc.kind, tc.iface, tc.step, tc.priority, tc.opts...)
			var me *MetadataError
			if !errors.As(err, &me) || !errors.Is(err, ErrInvalidMetadata) {
				t.Fatalf("Declare error = %v, want *MetadataError", err)
			}
			if me.Field != tc.wantField {
				t.Fatalf("Field = %q, want %q (%v)", me.Field, tc.wantField, err)
			}
		})
	}
}

func TestMustDeclarePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("MustDeclare did not panic on invalid metadata")
		} else if err, ok := r.(error); !ok || !errors.Is(err, ErrInvalidMetadata) {
			t.Fatalf("panic value = %v, want ErrInvalidMetadata", r)
		}
	}()
	MustDeclare(Deploy, "deploy", "deploy", -5)
}

func TestParseArgsInfo(t *testing.T) {
	good := map[string]any{
		"force": map[string]any{"description": "force it", "required": true},
		"level": map[string]any{"description": ""},
	}
	got, err := ParseArgsInfo(Clean, "deploy", "s", good)
	if err != nil {
		t.Fatalf("ParseArgsInfo: %v", err)
	}
	want := map[string]ArgInfo{"force": {Description: "force it", Required: true}, "level": {}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseArgsInfo = %+v, want %+v", got, want)
	}
	if got, err := ParseArgsInfo(Clean, "deploy", "s", nil); err != nil || got != nil {
		t.Fatalf("nil argsinfo = %v, %v", got, err)
	}
	bad := []struct {
		name  string
		raw   any
		field string
	}{
		{"not an object", []any{"x"}, "argsinfo"},
		{"entry not an object", map[string]any{"x": "desc"}, "argsinfo.x"},
		{"unknown key", map[string]any{"x": map[string]any{"description": "d", "default": 1.0}}, "argsinfo.x"},
		{"missing description", map[string]any{"x": map[string]any{"required": true}}, "argsinfo.x"},
		{"non-string description", map[string]any{"x": map[string]any{"description": 3.0}}, "argsinfo.x"},
		{"non-bool required", map[string]any{"x": map[string]any{"description": "d", "required": "yes"}}, "argsinfo.x"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseArgsInfo(Clean, "deploy", "s", tc.raw)
			var me *MetadataError
			if !errors.As(err, &me) || me.Field != tc.field {
				t.Fatalf("error = %v, want *MetadataError on %s", err, tc.field)
			}
		})
	}
}

func TestAgentSteps(t *testing.T) {
	got := AgentSteps(Clean, map[string][]Step{
		"SpecificHardwareManager": {{Interface: "raid", Name: "create_configuration", Priority: 0, Abortable: true}},
		"GenericHardwareManager": {
			{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true},
			{Interface: "boot", Name: "ignored", Priority: 10},
		},
	})
	want := map[string][]Step{
		"deploy": {{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true, RequiresRamdisk: true}},
		"raid":   {{Interface: "raid", Name: "create_configuration", Abortable: true, RequiresRamdisk: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AgentSteps = %+v, want %+v", got, want)
	}
}

// TestArgsOrderSurvivesJSON checks that the declaration order of a step's
// arguments (WithArg) is kept when the step is encoded and decoded, and
// that missing required arguments are reported in it, as Ironic lists
// them in the order of its argsinfo dictionary.
func TestArgsOrderSurvivesJSON(t *testing.T) {
	s := MustDeclare(Clean, InterfaceBIOS, "configure", 0,
		WithArg("zeta", ArgInfo{Description: "z", Required: true}),
		WithArg("alpha", ArgInfo{Description: "a", Required: true}),
		WithArgsInfo(map[string]ArgInfo{"mid": {Description: "m", Required: true}, "beta": {Description: "b", Required: true}}))
	if got, want := strings.Join(s.ArgNames(), ","), "zeta,alpha,beta,mid"; got != want {
		t.Fatalf("ArgNames() = %s, want %s", got, want)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"argsinfo":{"zeta":`) || strings.Index(string(raw), `"alpha"`) > strings.Index(string(raw), `"beta"`) {
		t.Fatalf("argsinfo not in declaration order: %s", raw)
	}
	var back Step
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(back.ArgsOrder, ","); got != "zeta,alpha,beta,mid" {
		t.Fatalf("decoded ArgsOrder = %s", got)
	}
	_, err = ValidateUserSteps(Clean, []Step{{Interface: InterfaceBIOS, Name: "configure"}}, []Step{back}, ValidateOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("validation = %v", err)
	}
	if got := strings.Join(ve.Problems[0].Names, ","); got != "zeta,alpha,beta,mid" {
		t.Errorf("missing names = %s, want declaration order", got)
	}
	if !strings.HasSuffix(ve.Problems[0].Message, "is missing these required arguments: zeta (z), alpha (a), beta (b), mid (m)") {
		t.Errorf("message = %q", ve.Problems[0].Message)
	}
}

// TestDeployPrefixHasNoSpace checks Ironic's exact text for invalid user
// deploy steps: its prefix ends at the full stop and the first problem
// follows without a space ("failed.node does not support ...").
func TestDeployPrefixHasNoSpace(t *testing.T) {
	e := &ValidationError{Kind: Deploy, Problems: []Problem{{Code: ProblemUnknownStep, Origin: OriginUser,
		Message: "node does not support this deploy step: {'interface': 'bios', 'step': 'x', 'args': {}, 'priority': 1}"}}}
	want := `Validation of deploy steps from "deploy steps" argument failed.node does not support this deploy step: {'interface': 'bios', 'step': 'x', 'args': {}, 'priority': 1}`
	if got := e.Message(); got != want {
		t.Errorf("Message() =\n%s\nwant\n%s", got, want)
	}
}
