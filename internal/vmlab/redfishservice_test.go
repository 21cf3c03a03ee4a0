package vmlab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHardware records what the BMC asks of the machine.
type fakeHardware struct {
	mu     sync.Mutex
	on     bool
	medium string
	calls  []string
	failOn error
}

func (f *fakeHardware) start(target, medium string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOn != nil {
		return f.failOn
	}
	f.on, f.medium = true, medium
	f.calls = append(f.calls, "start "+target+" "+medium)
	return nil
}

func (f *fakeHardware) stop(graceful bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = false
	f.calls = append(f.calls, fmt.Sprintf("stop graceful=%v", graceful))
	return nil
}

func (f *fakeHardware) running() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on
}

func (f *fakeHardware) changeMedium(m string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.medium = m
	f.calls = append(f.calls, "medium "+m)
	return nil
}

func (f *fakeHardware) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

type rfTest struct {
	t   *testing.T
	hw  *fakeHardware
	svc *rfService
	srv *httptest.Server
}

func newRFTest(t *testing.T, o rfServiceOptions) *rfTest {
	t.Helper()
	hw := &fakeHardware{}
	o.Name, o.SystemID, o.UUID, o.Username, o.Password = "vm", "vm", "a1b2c3d4-e5f6-4000-8000-525400e2e001", "admin", "s3cret"
	o.MediaDir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc := newRFService(ctx, hw, o)
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return &rfTest{t: t, hw: hw, svc: svc, srv: srv}
}

// do sends a request with the BMC's credentials (auth false: none) and
// returns the status and the decoded body.
func (r *rfTest) do(method, path string, body any, auth bool) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = strings.NewReader(string(j))
	}
	req, _ := http.NewRequest(method, r.srv.URL+path, rd)
	if auth {
		req.SetBasicAuth("admin", "s3cret")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func (r *rfTest) system() map[string]any {
	r.t.Helper()
	code, m := r.do("GET", "/redfish/v1/Systems/vm", nil, true)
	if code != 200 {
		r.t.Fatalf("GET system: %d %v", code, m)
	}
	return m
}

func (r *rfTest) wantError(code int, m map[string]any, wantCode int, msgID string) {
	r.t.Helper()
	if code != wantCode {
		r.t.Errorf("status %d, want %d (%v)", code, wantCode, m)
		return
	}
	e, _ := m["error"].(map[string]any)
	info, _ := e["@Message.ExtendedInfo"].([]any)
	if len(info) == 0 || !strings.HasSuffix(fmt.Sprint(info[0].(map[string]any)["MessageId"]), "."+msgID) {
		r.t.Errorf("error body %v, want MessageId ...%s", m, msgID)
	}
}

func TestRedfishBMCAuth(t *testing.T) {
	r := newRFTest(t, rfServiceOptions{})
	if code, m := r.do("GET", "/redfish/v1", nil, false); code != 200 || m["Systems"] == nil {
		t.Errorf("service root without credentials: %d %v", code, m)
	}
	for _, p := range []string{"/redfish/v1/Systems", "/redfish/v1/Systems/vm", "/redfish/v1/Managers/bmc/VirtualMedia/Cd"} {
		code, m := r.do("GET", p, nil, false)
		r.wantError(code, m, 401, "InsufficientPrivilege")
	}
	req, _ := http.NewRequest("GET", r.srv.URL+"/redfish/v1/Systems", nil)
	req.SetBasicAuth("admin", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("wrong password: %d %v", resp.StatusCode, resp.Header)
	}
	code, _ := r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, false)
	if code != 401 || r.hw.running() {
		t.Errorf("reset without credentials: %d, running %v", code, r.hw.running())
	}
	if code, m := r.do("GET", "/redfish/v1/Systems/nope", nil, true); code != 404 {
		t.Errorf("unknown system: %d %v", code, m)
	}
}

func TestRedfishBMCPowerAndBootOnce(t *testing.T) {
	r := newRFTest(t, rfServiceOptions{})
	sys := r.system()
	if sys["PowerState"] != "Off" {
		t.Fatalf("PowerState %v, want Off", sys["PowerState"])
	}
	reset := func(rt string) {
		t.Helper()
		if code, m := r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}, true); code != 204 {
			t.Fatalf("reset %s: %d %v", rt, code, m)
		}
	}
	patch := func(b map[string]any) {
		t.Helper()
		if code, m := r.do("PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": b}, true); code != 204 {
			t.Fatalf("PATCH %v: %d %v", b, code, m)
		}
	}
	patch(map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"})
	boot := r.system()["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "Cd" || boot["BootSourceOverrideEnabled"] != "Once" {
		t.Errorf("boot override %v", boot)
	}
	reset("On")
	reset("On") // on already: nothing
	if got := r.hw.log(); fmt.Sprint(got) != "[start Cd ]" {
		t.Errorf("hardware calls %q, want one start from the CD", got)
	}
	if r.system()["PowerState"] != "On" {
		t.Error("not On after On")
	}
	boot = r.system()["Boot"].(map[string]any)
	if boot["BootSourceOverrideEnabled"] != "Disabled" || boot["BootSourceOverrideTarget"] != "None" {
		t.Errorf("a Once override not spent by the boot: %v", boot)
	}
	reset("ForceRestart")
	if got := r.hw.log(); fmt.Sprint(got) != "[stop graceful=false start None ]" {
		t.Errorf("restart: %q, want stop then start with the machine's own order", got)
	}
	patch(map[string]any{"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"})
	reset("ForceOff")
	reset("ForceOff") // off already: nothing
	reset("On")
	reset("GracefulShutdown")
	reset("PowerCycle") // off: powers on
	if got := r.hw.log(); fmt.Sprint(got) != "[stop graceful=false start Hdd  stop graceful=true start Hdd ]" {
		t.Errorf("continuous override: %q", got)
	}
	if boot := r.system()["Boot"].(map[string]any); boot["BootSourceOverrideEnabled"] != "Continuous" {
		t.Errorf("a Continuous override spent: %v", boot)
	}
	if ev := r.svc.eventList(); len(ev) == 0 || len(r.svc.startTimes()) != 4 {
		t.Errorf("events %q, starts %d", ev, len(r.svc.startTimes()))
	}
}

func TestRedfishBMCRefusals(t *testing.T) {
	r := newRFTest(t, rfServiceOptions{})
	const resetURI = "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset"
	for _, c := range []struct {
		method, path string
		body         any
		code         int
		id           string
	}{
		{"POST", resetURI, map[string]any{"ResetType": "Explode"}, 400, "ActionParameterValueNotInList"},
		{"POST", resetURI, map[string]any{}, 400, "ActionParameterMissing"},
		{"POST", resetURI, map[string]any{"ResetType": 1}, 400, "ActionParameterMissing"},
		{"POST", resetURI, map[string]any{"ResetType": "On", "Force": true}, 400, "ActionParameterUnknown"},
		{"POST", resetURI, "{not json", 400, "MalformedJSON"},
		{"POST", resetURI, `{"ResetType":"On","pad":"` + strings.Repeat("x", rfMaxBody) + `"}`, 413, "GeneralError"},
		{"PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Floppy"}}, 400, "PropertyValueNotInList"},
		{"PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Sometimes"}}, 400, "PropertyValueNotInList"},
		{"PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "UEFI"}}, 400, "PropertyValueNotInList"},
		{"PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": 3}}, 400, "PropertyValueTypeError"},
		{"PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": map[string]any{"BootOrder": []string{"a"}}}, 400, "PropertyNotWritable"},
		{"PATCH", "/redfish/v1/Systems/vm", map[string]any{"PowerState": "On"}, 400, "PropertyNotWritable"},
		{"PATCH", "/redfish/v1/Managers/bmc", map[string]any{"Name": "x"}, 405, "OperationNotAllowed"},
		{"DELETE", "/redfish/v1/Systems/vm", nil, 405, "OperationNotAllowed"},
		{"POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Explode", map[string]any{}, 404, "ResourceMissingAtURI"},
		{"POST", rfCd + "/Actions/VirtualMedia.InsertMedia", map[string]any{}, 400, "ActionParameterMissing"},
		{"POST", rfCd + "/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "ftp://x/y.iso"}, 400, "ActionParameterValueFormatError"},
		{"POST", rfCd + "/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "http://u:p@x/y.iso"}, 400, "ActionParameterValueFormatError"},
		{"POST", rfCd + "/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "http://x/y.iso", "Inserted": false}, 400, "ActionParameterValueNotInList"},
		{"POST", rfCd + "/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "http://x/y.iso", "Bogus": 1}, 400, "ActionParameterUnknown"},
		{"POST", rfCd + "/Actions/VirtualMedia.EjectMedia", map[string]any{"Now": true}, 400, "ActionParameterUnknown"},
	} {
		code, m := r.do(c.method, c.path, c.body, true)
		t.Run(c.method+" "+c.path+" "+c.id, func(t *testing.T) {
			rt := *r
			rt.t = t
			rt.wantError(code, m, c.code, c.id)
		})
	}
	if len(r.hw.log()) != 0 {
		t.Error("a refused request reached the machine")
	}
	boot := r.system()["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "None" || boot["BootSourceOverrideEnabled"] != "Disabled" {
		t.Errorf("a refused PATCH changed the override: %v", boot)
	}
}

func TestRedfishBMCVirtualMedia(t *testing.T) {
	images := http.NewServeMux()
	images.HandleFunc("/ipa.iso", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(strings.Repeat("I", 3000))) })
	images.HandleFunc("/big.iso", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(make([]byte, 5000)) })
	images.HandleFunc("/chunked.iso", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 5; i++ {
			_, _ = w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
		}
	})
	images.HandleFunc("/slow.iso", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	images.HandleFunc("/missing.iso", http.NotFound)
	img := httptest.NewServer(images)
	defer img.Close()
	r := newRFTest(t, rfServiceOptions{MaxMediaSize: 4096, MediaFetchTimeout: 300 * time.Millisecond})
	insert := func(name string) (int, map[string]any) {
		return r.do("POST", rfCd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": img.URL + "/" + name, "Inserted": true, "WriteProtected": true}, true)
	}
	for _, name := range []string{"big.iso", "chunked.iso", "slow.iso", "missing.iso"} {
		code, m := insert(name)
		r.wantError(code, m, 400, "ActionParameterValueError")
	}
	entries, _ := os.ReadDir(r.svc.mediaDir)
	if len(entries) != 0 {
		t.Errorf("failed downloads left %d files", len(entries))
	}
	// Inserted while off: the next start gets it.
	if code, m := insert("ipa.iso"); code != 204 {
		t.Fatalf("insert: %d %v", code, m)
	}
	code, cd := r.do("GET", rfCd, nil, true)
	if code != 200 || cd["Inserted"] != true || cd["Image"] != img.URL+"/ipa.iso" || cd["ImageName"] != "ipa.iso" {
		t.Errorf("CD after insert: %d %v", code, cd)
	}
	code, m := insert("ipa.iso")
	r.wantError(code, m, 409, "ResourceInUse")
	r.do("PATCH", "/redfish/v1/Systems/vm", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}, true)
	r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, true)
	calls := r.hw.log()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "start Cd "+r.svc.mediaDir) {
		t.Fatalf("start with the medium: %q", calls)
	}
	medium := strings.TrimPrefix(calls[0], "start Cd ")
	if b, err := os.ReadFile(medium); err != nil || len(b) != 3000 {
		t.Errorf("the medium: %d bytes, %v", len(b), err)
	}
	// Running: eject and insert go through the machine (QMP).
	if code, m := r.do("POST", rfCd+"/Actions/VirtualMedia.EjectMedia", map[string]any{}, true); code != 204 {
		t.Fatalf("eject: %d %v", code, m)
	}
	if code, m := r.do("POST", rfCd+"/Actions/VirtualMedia.EjectMedia", nil, true); code != 204 {
		t.Errorf("eject of an empty drive: %d %v", code, m)
	}
	if _, err := os.Stat(medium); !os.IsNotExist(err) {
		t.Errorf("the ejected medium's file is still there: %v", err)
	}
	if code, m := insert("ipa.iso"); code != 204 {
		t.Fatalf("insert: %d %v", code, m)
	}
	calls = r.hw.log()
	if len(calls) != 2 || calls[0] != "medium " || !strings.HasPrefix(calls[1], "medium "+r.svc.mediaDir) {
		t.Errorf("running machine's medium changes: %q", calls)
	}
	if _, cd := r.do("GET", rfCd, nil, true); cd["Inserted"] != true || cd["ConnectedVia"] != "URI" {
		t.Errorf("CD: %v", cd)
	}
}

func TestRedfishBMCStartFailure(t *testing.T) {
	r := newRFTest(t, rfServiceOptions{})
	r.hw.failOn = errors.New("no QEMU")
	code, m := r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, true)
	r.wantError(code, m, 500, "InternalError")
	if r.system()["PowerState"] != "Off" || len(r.svc.startTimes()) != 0 {
		t.Error("a failed start counted as a start")
	}
}

// TestQMPCommand runs qmpCommand against a stand-in QMP server: the
// greeting, capabilities negotiation, an event before the answer, and
// an error answer.
func TestQMPCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			fmt.Fprint(c, `{"QMP": {"version": {}, "capabilities": []}}`+"\n")
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				var m struct {
					Execute   string         `json:"execute"`
					Arguments map[string]any `json:"arguments"`
				}
				_ = json.Unmarshal([]byte(line), &m)
				switch m.Execute {
				case "qmp_capabilities":
					fmt.Fprint(c, `{"return": {}}`+"\n")
				case "blockdev-change-medium":
					got <- fmt.Sprint(m.Arguments["id"], " ", m.Arguments["filename"])
					fmt.Fprint(c, `{"event": "DEVICE_TRAY_MOVED", "data": {}}`+"\n"+`{"return": {}}`+"\n")
				default:
					fmt.Fprint(c, `{"error": {"class": "CommandNotFound", "desc": "no such command"}}`+"\n")
				}
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := qmpCommand(ctx, sock, "blockdev-change-medium", map[string]any{"id": rfCdDevice, "filename": "/x.iso", "format": "raw"}); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != rfCdDevice+" /x.iso" {
		t.Errorf("server got %q", g)
	}
	err = qmpCommand(ctx, sock, "explode", nil)
	if err == nil || !strings.Contains(err.Error(), "CommandNotFound") {
		t.Errorf("error answer: %v", err)
	}
	if err := qmpCommand(ctx, filepath.Join(t.TempDir(), "none.sock"), "eject", nil); err == nil {
		t.Error("no QMP socket: no error")
	}
}
