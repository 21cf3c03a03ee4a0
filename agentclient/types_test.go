package agentclient_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/steps"
)

func TestAgentErrorShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want agentclient.AgentError
	}{
		{`{"type":"CleaningError","code":500,"message":"Clean step failed","details":"boom"}`, agentclient.AgentError{Type: "CleaningError", Code: 500, Message: "Clean step failed", Details: "boom"}},
		{`{"error":"plain"}`, agentclient.AgentError{Message: "plain"}},
		{`"bare"`, agentclient.AgentError{Message: "bare"}},
		{`{"type":"X","code":"409","details":{"k":1}}`, agentclient.AgentError{Type: "X", Code: 409, Details: `{"k":1}`}},
	} {
		var got agentclient.AgentError
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil || got != tc.want {
			t.Errorf("%s: %+v %v", tc.in, got, err)
		}
	}
	var e agentclient.AgentError
	if err := json.Unmarshal([]byte(`[1]`), &e); err == nil {
		t.Error("array accepted as command_error")
	}
	full := agentclient.AgentError{Type: "CleaningError", Message: "Clean step failed", Details: "boom"}
	if full.String() != "CleaningError: Clean step failed: boom" {
		t.Errorf("String() = %q", full.String())
	}
}

func TestMaskSecrets(t *testing.T) {
	in := map[string]any{
		"ipmi_password":      "p",
		"agent_secret_token": "t",
		"nested":             map[string]any{"redfish_password": "p", "address": "10.0.0.1"},
		"list":               []any{map[string]any{"private_key": "k", "name": "n"}},
		"deploy_boot_mode":   "uefi",
	}
	want := map[string]any{
		"ipmi_password":      "******",
		"agent_secret_token": "******",
		"nested":             map[string]any{"redfish_password": "******", "address": "10.0.0.1"},
		"list":               []any{map[string]any{"private_key": "******", "name": "n"}},
		"deploy_boot_mode":   "uefi",
	}
	got := agentclient.MaskSecrets(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if in["ipmi_password"] != "p" || in["nested"].(map[string]any)["redfish_password"] != "p" {
		t.Fatal("input modified")
	}
}

func TestParseAPIVersion(t *testing.T) {
	for in, ok := range map[string]bool{"1.68": true, " 1.1 ": true, "1": false, "1.x": false, "-1.2": false, "1.2.3": false, "": false} {
		v, err := agentclient.ParseAPIVersion(in)
		if (err == nil) != ok {
			t.Errorf("%q: %v %v", in, v, err)
		}
		if err != nil && !errors.Is(err, agentclient.ErrInvalidArgument) {
			t.Errorf("%q: untyped error", in)
		}
	}
	lo, hi := agentclient.SupportedAPIVersions()
	if lo.String() != "1.1" || hi.String() != "1.84" || !hi.AtLeast(lo) || hi.Less(lo) {
		t.Fatal("supported versions")
	}
}

func TestDecodeStepsResultErrors(t *testing.T) {
	for _, body := range []string{
		`{"clean_steps":[1]}`,
		`{"clean_steps":{"M":[{"priority":1}]}}`,
		`{"clean_steps":{},"hardware_manager_version":[]}`,
		`{"clean_steps":{},"hardware_manager_version":{"m":true}}`,
		`"a string"`,
	} {
		r := &agentclient.CommandResult{ID: "1", Name: "get_clean_steps", Status: agentclient.StatusSucceeded, Result: json.RawMessage(body)}
		if _, err := agentclient.DecodeStepsResult(steps.Clean, r); !errors.Is(err, agentclient.ErrAgentAPI) {
			t.Errorf("%s: %v", body, err)
		}
	}
	r := &agentclient.CommandResult{ID: "1", Name: "get_clean_steps", Status: agentclient.StatusSucceeded,
		Result: json.RawMessage(`{"clean_steps":{"M":[{"interface":"deploy","step":"s","priority":5}]},"hardware_manager_version":{"m":1.5}}`)}
	got, err := agentclient.DecodeStepsResult(steps.Clean, r)
	if err != nil || got.HardwareManagerVersion["m"] != "1.5" || got.Steps["M"][0].Priority != 5 {
		t.Fatalf("%+v %v", got, err)
	}
}
