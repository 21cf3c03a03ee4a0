package agenttest_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
)

// ipaInvalid is the command_error IPA 2023.1 reports when
// standby._validate_image_info refuses image_info.
func ipaInvalid(details string) *agentclient.AgentError {
	return &agentclient.AgentError{Type: "InvalidCommandParamsError", Code: 400, Message: "Invalid command parameters", Details: details}
}

// TestValidateImageInfo is IPA 2023.1's standby._validate_image_info as a
// table: every rule in IPA's order, with IPA's error class and text. The
// first two rows are the image_info Anvil used to send (real IPA refused
// both).
func TestValidateImageInfo(t *testing.T) {
	const noChecksum = "Image checksum is not available, either the 'checksum' field or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification."
	for _, tc := range []struct {
		name string
		info string
		want *agentclient.AgentError
	}{
		{"old anvil: image_url, no urls", `{"id":"n1","image_url":"http://x/img","image_checksum":"abc"}`, ipaInvalid("Image is missing 'urls' field.")},
		{"old anvil: checksum under its instance_info name", `{"id":"n1","urls":["http://x/img"],"image_checksum":"abc"}`, ipaInvalid(noChecksum)},
		{"null", `null`, ipaInvalid("Image is missing 'id' field.")},
		{"empty", `{}`, ipaInvalid("Image is missing 'id' field.")},
		{"no id", `{"urls":["http://x/img"],"checksum":"abc"}`, ipaInvalid("Image is missing 'id' field.")},
		{"id checked before urls", `{"checksum":"abc"}`, ipaInvalid("Image is missing 'id' field.")},
		{"no urls", `{"id":"img","checksum":"abc"}`, ipaInvalid("Image is missing 'urls' field.")},
		{"urls null", `{"id":"img","urls":null,"checksum":"abc"}`, ipaInvalid("Image 'urls' must be a list with at least one element.")},
		{"urls a string", `{"id":"img","urls":"http://x/img","checksum":"abc"}`, ipaInvalid("Image 'urls' must be a list with at least one element.")},
		{"urls empty", `{"id":"img","urls":[],"checksum":"abc"}`, ipaInvalid("Image 'urls' must be a list with at least one element.")},
		{"checksum empty", `{"id":"img","urls":["u"],"checksum":""}`, ipaInvalid("Image 'checksum' must be a non-empty string.")},
		{"checksum a number", `{"id":"img","urls":["u"],"checksum":5}`, ipaInvalid("Image 'checksum' must be a non-empty string.")},
		{"checksum null counts as absent", `{"id":"img","urls":["u"],"checksum":null}`, ipaInvalid(noChecksum)},
		{"algo without value", `{"id":"img","urls":["u"],"os_hash_algo":"sha256"}`, ipaInvalid("Image 'os_hash_value' must be a non-empty string.")},
		{"value without algo", `{"id":"img","urls":["u"],"os_hash_value":"ab"}`, ipaInvalid("Image 'os_hash_algo' must be a non-empty string.")},
		{"algo not a string", `{"id":"img","urls":["u"],"os_hash_algo":1,"os_hash_value":"ab"}`, ipaInvalid("Image 'os_hash_algo' must be a non-empty string.")},
		{"bad hash pair even with a checksum", `{"id":"img","urls":["u"],"checksum":"abc","os_hash_value":"ab"}`, ipaInvalid("Image 'os_hash_algo' must be a non-empty string.")},
		{"empty hash pair is falsy: absent", `{"id":"img","urls":["u"],"os_hash_algo":"","os_hash_value":""}`, ipaInvalid(noChecksum)},
		{"no checksum at all", `{"id":"img","urls":["u"]}`, ipaInvalid(noChecksum)},
		{"checksum", `{"id":"img","urls":["u"],"checksum":"abc"}`, nil},
		{"hash pair", `{"id":"img","urls":["u"],"os_hash_algo":"sha256","os_hash_value":"ab"}`, nil},
		{"both", `{"id":"img","urls":["u"],"checksum":"abc","os_hash_algo":"sha512","os_hash_value":"ab"}`, nil},
		{"a list", `["urls"]`, ipaInvalid("Image is missing 'id' field.")},
		{"a number", `7`, &agentclient.AgentError{Type: "DeploymentError", Code: 500, Message: "Deploy step failed",
			Details: "Unexpected exception performing deploy step write_image. TypeError: argument of type 'int' is not iterable"}},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.info), &v); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := agenttest.ValidateImageInfo(v)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: ValidateImageInfo(%s) = %+v, want %+v", tc.name, tc.info, got, tc.want)
		}
	}
}

// TestWriteImageValidatedOverHTTP sends write_image through the agent's
// API as the conductor does: a bad image_info makes the command FAILED
// with IPA's error (the step is accepted first, as IPA's asynchronous
// deploy step is), a good one succeeds.
func TestWriteImageValidatedOverHTTP(t *testing.T) {
	a := agenttest.NewAgent(agenttest.AgentConfig{Token: tok})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	run := func(args string) map[string]any {
		t.Helper()
		body := `{"name":"deploy.execute_deploy_step","params":{"step":{"interface":"deploy","step":"write_image","priority":80,"args":` + args + `},"node":{},"ports":[]}}`
		st, out := call(t, "POST", srv.URL+"/v1/commands/?wait=true&agent_token="+tok, body)
		if st != 200 {
			t.Fatalf("HTTP %d %v", st, out)
		}
		return out
	}
	bad := run(`{"image_info":{"id":"n1","urls":["http://x/img"],"image_checksum":"abc"}}`)
	errObj, _ := bad["command_error"].(map[string]any)
	if bad["command_status"] != "FAILED" || errObj["type"] != "InvalidCommandParamsError" || errObj["code"] != float64(400) ||
		errObj["details"] != "Image checksum is not available, either the 'checksum' field or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification." {
		t.Fatalf("write_image with image_checksum only = %v", bad)
	}
	extra := run(`{"image_info":{"id":"i","urls":["u"],"checksum":"c"},"node_uuid":"n1"}`)
	errObj, _ = extra["command_error"].(map[string]any)
	if extra["command_status"] != "FAILED" || errObj["type"] != "DeploymentError" {
		t.Fatalf("write_image with an unexpected argument = %v", extra)
	}
	good := run(`{"image_info":{"id":"img","urls":["http://x/img"],"checksum":"abc"},"configdrive":null}`)
	if good["command_status"] != "SUCCEEDED" {
		t.Fatalf("write_image with a valid image_info = %v", good)
	}
}
