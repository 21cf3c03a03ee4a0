package steps

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/anvilmetal/anvil/internal/jsonexact"
)

func TestProgressKeys(t *testing.T) {
	want := map[Kind][]string{
		Clean:   {"clean_steps", "clean_step_index", "cleaning_reboot", "skip_current_clean_step", "cleaning_polling", "cleaning_disable_ramdisk", "declarative_cleaning", "", "", "agent_cached_clean_steps", "agent_cached_clean_steps_refreshed"},
		Deploy:  {"deploy_steps", "deploy_step_index", "deployment_reboot", "skip_current_deploy_step", "deployment_polling", "", "", "user_deploy_steps", "steps_validated", "agent_cached_deploy_steps", "agent_cached_deploy_steps_refreshed"},
		Service: {"service_steps", "service_step_index", "servicing_reboot", "skip_current_service_step", "servicing_polling", "service_disable_ramdisk", "", "", "", "agent_cached_service_steps", "agent_cached_service_steps_refreshed"},
	}
	for kind, keys := range want {
		k, ok := kind.Keys()
		if !ok {
			t.Fatalf("%s has no keys", kind)
		}
		got := []string{k.Steps, k.Index, k.Reboot, k.SkipCurrentStep, k.Polling, k.DisableRamdisk, k.Declarative, k.UserSteps, k.StepsValidated, k.AgentCache, k.AgentRefreshed}
		if !reflect.DeepEqual(got, keys) {
			t.Errorf("%s keys = %v, want %v", kind, got, keys)
		}
	}
	if _, ok := Verify.Keys(); ok {
		t.Error("verify keeps no progress")
	}
}

// TestProgressRoundTrip writes progress into driver_internal_info, passes
// it through JSON as a database would, and reads it back.
func TestProgressRoundTrip(t *testing.T) {
	steps := []Step{
		{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true, RequiresRamdisk: true},
		{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "A", "value": "B"}}}},
	}
	for _, p := range []Progress{
		{Kind: Clean, Steps: steps, Index: ptrInt(1), Current: &steps[1], Reboot: true, SkipCurrentStep: ptrBool(false), Polling: true, DisableRamdisk: true, Declarative: true},
		{Kind: Deploy, Steps: steps, Index: ptrInt(0), Current: &steps[0], UserSteps: steps[1:], StepsValidated: true, SkipCurrentStep: ptrBool(true)},
		{Kind: Service, Steps: steps, DisableRamdisk: true},
	} {
		t.Run(string(p.Kind), func(t *testing.T) {
			info := map[string]any{"agent_url": "https://10.0.0.5:9999"}
			if err := p.Write(info); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(info)
			if err != nil {
				t.Fatal(err)
			}
			var stored map[string]any
			if err := json.Unmarshal(raw, &stored); err != nil {
				t.Fatal(err)
			}
			if stored["agent_url"] != "https://10.0.0.5:9999" {
				t.Fatal("Write must keep unrelated keys")
			}
			got, err := ReadProgress(p.Kind, stored, p.Current)
			if err != nil {
				t.Fatal(err)
			}
			want := p.clone()
			if want.Steps != nil {
				// JSON numbers come back as float64.
				want.Steps = toSteps(t, want.Steps)
				want.UserSteps = toSteps(t, want.UserSteps)
			}
			got.Steps = toSteps(t, got.Steps)
			got.UserSteps = toSteps(t, got.UserSteps)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func toSteps(t *testing.T, s []Step) []Step {
	t.Helper()
	if s == nil {
		return nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []Step
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProgressWriteShape(t *testing.T) {
	info := map[string]any{"cleaning_reboot": true, "skip_current_clean_step": false, "cleaning_polling": true}
	p := Progress{Kind: Clean, Steps: []Step{{Interface: "deploy", Name: "erase_devices", Priority: 10}}}
	if err := p.Write(info); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"clean_steps":      []any{map[string]any{"interface": "deploy", "step": "erase_devices", "priority": 10.0, "abortable": false}},
		"clean_step_index": nil,
	}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("driver_internal_info = %#v, want %#v", info, want)
	}
}

func TestReadProgressErrors(t *testing.T) {
	tests := []struct {
		name string
		info map[string]any
		key  string
	}{
		{"steps not a list", map[string]any{"clean_steps": "x"}, "clean_steps"},
		{"index not an integer", map[string]any{"clean_steps": []any{}, "clean_step_index": 1.5}, "clean_step_index"},
		{"index out of range", map[string]any{"clean_steps": []any{}, "clean_step_index": 0.0}, "clean_step_index"},
		{"flag not a bool", map[string]any{"cleaning_reboot": "yes"}, "cleaning_reboot"},
		{"skip flag not a bool", map[string]any{"skip_current_clean_step": 1.0}, "skip_current_clean_step"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadProgress(Clean, tc.info, nil)
			var pe *ProgressError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidProgress) || pe.Key != tc.key {
				t.Fatalf("error = %v, want *ProgressError on %s", err, tc.key)
			}
		})
	}
	if _, err := ReadProgress(Verify, map[string]any{}, nil); !errors.Is(err, ErrUnsupportedKind) {
		t.Fatalf("verify progress error = %v", err)
	}
}

func TestReadProgressEmptyAndGoValues(t *testing.T) {
	p, err := ReadProgress(Deploy, map[string]any{}, &Step{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Current != nil || p.Index != nil || p.Steps != nil || p.SkipCurrentStep != nil {
		t.Fatalf("empty progress = %+v", p)
	}
	// Go values of the right shape are accepted too.
	p, err = ReadProgress(Deploy, map[string]any{
		"deploy_steps":      []Step{{Interface: "deploy", Name: "deploy", Priority: 100}},
		"deploy_step_index": 0,
	}, nil)
	if err != nil || len(p.Steps) != 1 || *p.Index != 0 {
		t.Fatalf("Go values: %+v, %v", p, err)
	}
}

func TestWipe(t *testing.T) {
	info := map[string]any{"agent_url": "u", "hardware_manager_version": map[string]any{"generic": "1"}}
	p := Progress{Kind: Deploy, Steps: []Step{{Interface: "deploy", Name: "deploy"}}, Index: ptrInt(0),
		Reboot: true, SkipCurrentStep: ptrBool(false), Polling: true, UserSteps: []Step{{Interface: "deploy", Name: "deploy"}}, StepsValidated: true}
	if err := p.Write(info); err != nil {
		t.Fatal(err)
	}
	if err := WriteAgentCache(Deploy, info, map[string][]Step{"deploy": {{Interface: "deploy", Name: "write_image"}}}, "2026-11-29T18:00:00.000000"); err != nil {
		t.Fatal(err)
	}
	if err := Wipe(Deploy, info); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"agent_url": "u", "hardware_manager_version": map[string]any{"generic": "1"}, "deploy_steps": nil}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("after Wipe = %#v, want %#v", info, want)
	}
	if err := Wipe(Verify, info); !errors.Is(err, ErrUnsupportedKind) {
		t.Fatalf("Wipe(verify) = %v", err)
	}
}

func TestAgentCacheRoundTrip(t *testing.T) {
	info := map[string]any{}
	cache := map[string][]Step{"deploy": {{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true, RequiresRamdisk: true}}}
	if err := WriteAgentCache(Clean, info, cache, "2026-11-29T18:00:00.000000"); err != nil {
		t.Fatal(err)
	}
	if info["agent_cached_clean_steps_refreshed"] != "2026-11-29T18:00:00.000000" {
		t.Fatalf("refresh time not stored: %v", info)
	}
	got, err := ReadAgentCache(Clean, info)
	if err != nil || !reflect.DeepEqual(got, cache) {
		t.Fatalf("ReadAgentCache = %+v, %v", got, err)
	}
	if got, err := ReadAgentCache(Service, info); err != nil || got != nil {
		t.Fatalf("absent cache = %v, %v", got, err)
	}
	info["agent_cached_clean_steps"] = []any{"x"}
	if _, err := ReadAgentCache(Clean, info); !errors.Is(err, ErrInvalidProgress) {
		t.Fatalf("bad cache error = %v", err)
	}
	if err := (Progress{Kind: Clean, Steps: []Step{{Args: map[string]any{"c": make(chan int)}}}}).Write(map[string]any{}); !errors.Is(err, ErrInvalidProgress) {
		t.Fatalf("unmarshalable args error = %v", err)
	}
}

func TestCurrentColumn(t *testing.T) {
	p := Progress{Kind: Service}
	col, err := p.CurrentColumn()
	if err != nil || len(col) != 0 || col == nil {
		t.Fatalf("empty column = %#v, %v", col, err)
	}
	if s, err := StepFromColumn(Service, col); err != nil || s != nil {
		t.Fatalf("StepFromColumn({}) = %v, %v", s, err)
	}
	cur := Step{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{}}, AbortAfter: true}
	p.Current = &cur
	col, err = p.CurrentColumn()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"interface": "bios", "step": "apply_configuration", "priority": 0.0, "abortable": false,
		"args": map[string]any{"settings": []any{}}, "abort_after": true}
	if !reflect.DeepEqual(col, want) {
		t.Fatalf("column = %#v, want %#v", col, want)
	}
	back, err := StepFromColumn(Service, col)
	if err != nil || !reflect.DeepEqual(*back, cur) {
		t.Fatalf("StepFromColumn = %+v, %v", back, err)
	}
	if _, err := StepFromColumn(Service, map[string]any{"step": 5.0}); !errors.Is(err, ErrInvalidProgress) {
		t.Fatalf("bad column error = %v", err)
	}
}

// FuzzReadProgress reads arbitrary driver_internal_info documents: the
// result is a typed error or a progress that survives a Write/Read round
// trip and can be continued without panicking.
func FuzzReadProgress(f *testing.F) {
	f.Add(byte(0), []byte(`{"clean_steps": [{"interface": "deploy", "step": "erase_devices", "priority": 10}], "clean_step_index": 0, "cleaning_reboot": true}`))
	f.Add(byte(1), []byte(`{"deploy_steps": [], "deploy_step_index": null, "skip_current_deploy_step": false, "user_deploy_steps": [{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]}`))
	f.Add(byte(2), []byte(`{"service_steps": [{"interface": "power", "step": "wait", "args": {"seconds": "9999"}}], "service_step_index": 0}`))
	f.Add(byte(0), []byte(`{"clean_steps": "nope", "clean_step_index": -1}`))
	kinds := []Kind{Clean, Deploy, Service}
	planner, err := NewPlanner(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, k byte, data []byte) {
		kind := kinds[int(k)%len(kinds)]
		var info map[string]any
		if json.Unmarshal(data, &info) != nil {
			return
		}
		var cur *Step
		p, err := ReadProgress(kind, info, cur)
		if err != nil {
			if !errors.Is(err, ErrInvalidProgress) {
				t.Fatalf("error %v is not ErrInvalidProgress", err)
			}
			return
		}
		if p.Index != nil {
			c := p.Steps[*p.Index]
			p.Current = &c
		}
		out := map[string]any{}
		if err := p.Write(out); err != nil {
			t.Fatalf("Write: %v", err)
		}
		again, err := ReadProgress(kind, out, p.Current)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if len(again.Steps) != len(p.Steps) || !reflect.DeepEqual(again.Index, p.Index) || again.Reboot != p.Reboot {
			t.Fatalf("round trip changed the progress: %+v vs %+v", again, p)
		}
		for _, o := range []OutcomeKind{StepDone, AgentBusy, VersionMismatch, AbortRequested, AgentRebooted} {
			_ = planner.Decide(again, Outcome{Kind: o})
		}
	})
}

// TestStepArgsKeepExactNumbers follows user step arguments through
// ParseUserSteps, Progress.Write, a database-like JSON round trip and
// ReadProgress: 9007199254740993 and 1.0 must come out as they went in
// (before, they passed through float64 and became 9007199254740992 and
// 1), while an ordinary integer stays a float64 for code reading it.
func TestStepArgsKeepExactNumbers(t *testing.T) {
	user, err := ParseUserSteps(Clean, []byte(`[{"interface": "deploy", "step": "x", "args": {"n": 9007199254740993, "f": 1.0, "i": 7}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := user[0].Args["i"].(float64); !ok {
		t.Errorf("args.i = %#v, want float64 7", user[0].Args["i"])
	}
	info := map[string]any{}
	if err := (Progress{Kind: Clean, Steps: user}).Write(info); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := jsonexact.Decode(raw, &stored); err != nil {
		t.Fatal(err)
	}
	prog, err := ReadProgress(Clean, stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(prog.Steps[0].Args)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"f":1.0,"i":7,"n":9007199254740993}`; string(out) != want {
		t.Errorf("args after storage = %s, want %s", out, want)
	}
	if got := userStepRepr(Clean, prog.Steps[0]); got != "{'interface': 'deploy', 'step': 'x', 'args': {'f': 1.0, 'i': 7, 'n': 9007199254740993}}" {
		t.Errorf("repr in messages = %s", got)
	}
}
