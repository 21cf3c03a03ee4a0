package agenttest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

const tok = "Jb7iJ2V1q1sA0Gzh0nU4dXCmz1Y6-5uZC7J0wZq3o5A"

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

const cleanStep = `{"name":"clean.execute_clean_step","params":{"step":{"interface":"deploy","step":"erase_devices","priority":10},"node":{},"ports":[],"clean_version":{"generic_hardware_manager":"1.2"}}}`

func TestAgentRequestErrors(t *testing.T) {
	a := agenttest.NewAgent(agenttest.AgentConfig{Token: tok, CommandDelay: time.Second})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	good := "?agent_token=" + tok
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
		fault                    string
	}{
		{"not JSON", "POST", "/v1/commands/" + good, "{", 400, "Missing or invalid name or params"},
		{"no name", "POST", "/v1/commands/" + good, `{"params":{}}`, 400, "Missing or invalid name or params"},
		{"params not an object", "POST", "/v1/commands/" + good, `{"name":"standby.sync","params":[]}`, 400, "Missing or invalid name or params"},
		{"no params", "POST", "/v1/commands/" + good, `{"name":"standby.sync"}`, 400, "Missing or invalid name or params"},
		{"body is checked before the token", "POST", "/v1/commands/?agent_token=x", "{", 400, "Missing or invalid"},
		{"wrong token", "POST", "/v1/commands/?agent_token=x", `{"name":"standby.sync","params":{}}`, 401, "401 Unauthorized: Token invalid."},
		{"missing token", "POST", "/v1/commands/", `{"name":"standby.sync","params":{}}`, 401, "Token invalid."},
		{"list with wrong token", "GET", "/v1/commands/?agent_token=x", "", 401, "Token invalid."},
		{"get with wrong token", "GET", "/v1/commands/abc?agent_token=x", "", 401, "Token invalid."},
		{"no extension", "POST", "/v1/commands/" + good, `{"name":"sync","params":{}}`, 400, "<extension>.<name>"},
		{"unknown extension", "POST", "/v1/commands/" + good, `{"name":"flash.firmware","params":{}}`, 404, "Extension with id flash not found."},
		{"unknown command", "POST", "/v1/commands/" + good, `{"name":"standby.frobnicate","params":{}}`, 400, "Unknown command: frobnicate"},
		{"unknown command id", "GET", "/v1/commands/0000" + good, "", 404, "Command Result with id 0000 not found."},
		{"bad step", "POST", "/v1/commands/" + good, `{"name":"clean.execute_clean_step","params":{"step":{"step":"x"},"node":{},"ports":[]}}`, 400, "Invalid command parameters"},
		{"unknown path", "GET", "/v2/nothing", "", 404, "Not Found"},
		{"wrong method", "DELETE", "/v1/commands/", "", 405, "Method Not Allowed"},
	} {
		st, body := call(t, tc.method, srv.URL+tc.path, tc.body)
		fs, _ := body["faultstring"].(string)
		if st != tc.want || !strings.Contains(fs, tc.fault) {
			t.Errorf("%s: HTTP %d %v, want %d with %q", tc.name, st, body, tc.want, tc.fault)
		}
		if st >= 400 && body["faultcode"] != "Client" {
			t.Errorf("%s: faultcode %v", tc.name, body["faultcode"])
		}
	}
	if n := len(a.Executed()); n != 0 {
		t.Fatalf("refused requests ran %d commands", n)
	}
	// One command at a time: a running command makes the next one 409.
	st, body := call(t, "POST", srv.URL+"/v1/commands/"+good, cleanStep)
	if st != 200 || body["command_status"] != "RUNNING" {
		t.Fatalf("start: %d %v", st, body)
	}
	st, body = call(t, "POST", srv.URL+"/commands/"+good, `{"name":"standby.sync","params":{}}`)
	if st != 409 || body["faultstring"] != "Agent is busy: executing command execute_clean_step" {
		t.Fatalf("busy: %d %v", st, body)
	}
	if a.StepRuns(steps.Clean, "deploy", "erase_devices") != 1 || len(a.Executed()) != 1 {
		t.Fatalf("executions %+v", a.Executed())
	}
}

func TestAgentLifecycle(t *testing.T) {
	// The command runs long enough that the GET right after the POST sees
	// it running even on a loaded CI machine.
	const delay = time.Second
	a := agenttest.NewAgent(agenttest.AgentConfig{Token: tok, CommandDelay: delay})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	q := "?agent_token=" + tok
	st, started := call(t, "POST", srv.URL+"/v1/commands/"+q+"&wait=false", cleanStep)
	if st != 200 || started["command_status"] != "RUNNING" || started["command_name"] != "execute_clean_step" || started["command_result"] != nil || started["command_error"] != nil {
		t.Fatalf("started: %v", started)
	}
	id := started["id"].(string)
	_, now := call(t, "GET", srv.URL+"/v1/commands/"+id+q, "")
	if now["command_status"] != "RUNNING" {
		t.Fatalf("still running expected: %v", now)
	}
	_, done := call(t, "GET", srv.URL+"/v1/commands/"+id+q+"&wait=true", "")
	if done["command_status"] != "SUCCEEDED" {
		t.Fatalf("wait=true: %v", done)
	}
	res := done["command_result"].(map[string]any)
	if res["clean_step"].(map[string]any)["step"] != "erase_devices" {
		t.Fatalf("result: %v", res)
	}
	// wait=true on POST returns the finished command.
	_, synced := call(t, "POST", srv.URL+"/v1/commands/"+q+"&wait=true", cleanStep)
	if synced["command_status"] != "SUCCEEDED" {
		t.Fatalf("POST wait=true: %v", synced)
	}
	_, list := call(t, "GET", srv.URL+"/v1/commands"+q, "")
	if cmds := list["commands"].([]any); len(cmds) != 2 {
		t.Fatalf("list: %v", list)
	}
	_, status := call(t, "GET", srv.URL+"/status", "")
	if status["version"] != "10.0.0" {
		t.Fatalf("status: %v", status)
	}
	ex := a.Executed()
	if len(ex) != 2 || ex[0].FinishedAt.Sub(ex[0].StartedAt) < delay || ex[0].Step == nil {
		t.Fatalf("executions: %+v", ex)
	}
}

func TestAgentWithoutTokenAcceptsAny(t *testing.T) {
	a := agenttest.NewAgent(agenttest.AgentConfig{})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	if st, b := call(t, "POST", srv.URL+"/v1/commands/?wait=true", `{"name":"standby.sync","params":{}}`); st != 200 {
		t.Fatalf("%d %v", st, b)
	}
	a.SetToken(tok)
	if st, _ := call(t, "GET", srv.URL+"/v1/commands/", ""); st != 401 {
		t.Fatalf("after SetToken: %d", st)
	}
}

func TestAgentCloseFailsRunningCommands(t *testing.T) {
	a := agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: time.Hour})
	srv := httptest.NewServer(a)
	defer srv.Close()
	call(t, "POST", srv.URL+"/v1/commands/", cleanStep)
	a.Close()
	ex := a.Executed()
	if len(ex) != 1 || ex[0].Status != agentclient.StatusFailed {
		t.Fatalf("%+v", ex)
	}
}

func TestServerHostsManyAgents(t *testing.T) {
	srv, err := agenttest.NewServer(agenttest.ServerConfig{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	a1 := agenttest.NewAgent(agenttest.AgentConfig{})
	a2 := agenttest.NewAgent(agenttest.AgentConfig{})
	defer a1.Close()
	defer a2.Close()
	u1, _ := srv.Register("n1", a1)
	u2, _ := srv.Register("n2", a2)
	if _, err := srv.Register("n1", a2); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if _, err := srv.Register("a/b", a2); err == nil {
		t.Fatal("id with a slash accepted")
	}
	if u1 != srv.URL()+"/agents/n1" || srv.CertPEM() != "" || !strings.HasPrefix(u1, "http://") {
		t.Fatalf("url %q", u1)
	}
	call(t, "POST", u1+"/v1/commands/?wait=true", `{"name":"standby.sync","params":{}}`)
	if len(a1.Executed()) != 1 || len(a2.Executed()) != 0 {
		t.Fatal("commands not routed to their agent")
	}
	if st, _ := call(t, "GET", u2+"/v1/status", ""); st != 200 {
		t.Fatalf("status: %d", st)
	}
	srv.Unregister("n2")
	if st, _ := call(t, "GET", u2+"/v1/status", ""); st != 404 {
		t.Fatalf("after Unregister: %d", st)
	}
	if st, _ := call(t, "GET", srv.URL()+"/agents/zz/v1/status", ""); st != 404 {
		t.Fatalf("unknown agent: %d", st)
	}
}

func TestHardwareManagers(t *testing.T) {
	custom := agenttest.HardwareManager{
		Name: "AcmeHardwareManager", VersionKey: "acme", Version: "3",
		CleanSteps: []steps.Step{{Interface: "management", Name: "update_bmc", Priority: 50, Abortable: false, RebootRequested: true}},
	}
	a := agenttest.NewAgent(agenttest.AgentConfig{HardwareManagers: []agenttest.HardwareManager{agenttest.GenericHardwareManager(), custom}})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	_, r := call(t, "POST", srv.URL+"/v1/commands/?wait=true", `{"name":"clean.get_clean_steps","params":{"node":{},"ports":[]}}`)
	res := r["command_result"].(map[string]any)
	acme := res["clean_steps"].(map[string]any)["AcmeHardwareManager"].([]any)[0].(map[string]any)
	if acme["step"] != "update_bmc" || acme["reboot_requested"] != true || acme["priority"] != float64(50) {
		t.Fatalf("acme step: %v", acme)
	}
	if v := res["hardware_manager_version"].(map[string]any); v["acme"] != "3" || v["generic_hardware_manager"] != "1.2" {
		t.Fatalf("versions %v", v)
	}
	if !a.SetHardwareManagerVersion("AcmeHardwareManager", "4") || a.SetHardwareManagerVersion("Nope", "1") {
		t.Fatal("SetHardwareManagerVersion")
	}
	if a.HardwareManagerVersion()["acme"] != "4" {
		t.Fatal("version not changed")
	}
}
