package vmlab

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/steps"
)

// firmwareImages serves firmware images (any .bin but missing.bin).
func firmwareImages(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".bin") || strings.HasSuffix(r.URL.Path, "/missing.bin") {
			http.NotFound(w, r)
			return
		}
		n := 2048
		if strings.Contains(r.URL.Path, "big") {
			n = 8192 // over the BMC's bound
		}
		_, _ = w.Write([]byte(strings.Repeat("F", n)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitTask polls a task until it leaves Running.
func (r *rfTest) waitTask(uri string) map[string]any {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		code, m := r.do("GET", uri, nil, true)
		if code != 200 {
			r.t.Fatalf("GET %s: %d %v", uri, code, m)
		}
		if m["TaskState"] != "Running" {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.t.Fatalf("task %s still running", uri)
	return nil
}

// TestRedfishBMCUpdateService: a BIOS update is staged and changes the
// reported version at the next reset; a BMC update at once; a bad image
// URL fails the task with a Redfish error; bad requests are refused.
func TestRedfishBMCUpdateService(t *testing.T) {
	fw := firmwareImages(t)
	r := newRFTest(t, rfServiceOptions{MaxMediaSize: 4096, MediaFetchTimeout: 2 * time.Second})
	version := func(id string) string {
		_, m := r.do("GET", rfInventory+"/"+id, nil, true)
		v, _ := m["Version"].(string)
		return v
	}
	if version("BIOS") != LabBIOSVersion || version("BMC") != LabBMCVersion {
		t.Fatalf("initial versions %q %q", version("BIOS"), version("BMC"))
	}
	start := func(body map[string]any) string {
		t.Helper()
		req, _ := http.NewRequest("POST", r.srv.URL+rfSimpleUpd, strings.NewReader(mustJSON(body)))
		req.SetBasicAuth("admin", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 || resp.Header.Get("Location") == "" {
			t.Fatalf("SimpleUpdate %v: %d", body, resp.StatusCode)
		}
		return resp.Header.Get("Location")
	}
	task := r.waitTask(start(map[string]any{"ImageURI": fw + "/bios-2.1.bin", "Targets": []string{rfInvBIOS}}))
	msgs := mustJSON(task["Messages"])
	if task["TaskState"] != "Completed" || !strings.Contains(msgs, "ResetRequired") {
		t.Fatalf("BIOS task %v", task)
	}
	if version("BIOS") != LabBIOSVersion {
		t.Fatalf("the BIOS version changed before the reset: %q", version("BIOS"))
	}
	r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, true)
	if version("BIOS") != "bios-2.1" {
		t.Fatalf("BIOS version after the reset: %q", version("BIOS"))
	}
	task = r.waitTask(start(map[string]any{"ImageURI": fw + "/bmc-1.1.bin", "Targets": []string{rfInvBMC}}))
	if task["TaskState"] != "Completed" || version("BMC") != "bmc-1.1" {
		t.Fatalf("BMC task %v, version %q", task, version("BMC"))
	}
	for _, bad := range []string{fw + "/missing.bin", fw + "/big.bin", "http://127.0.0.1:1/none.bin"} {
		task = r.waitTask(start(map[string]any{"ImageURI": bad}))
		if task["TaskState"] != "Exception" || !strings.Contains(mustJSON(task["Messages"]), "Update.1.0.TransferFailed") {
			t.Fatalf("bad image %s: task %v", bad, task)
		}
	}
	if version("BIOS") != "bios-2.1" {
		t.Fatalf("a failed update changed the BIOS: %q", version("BIOS"))
	}
	for _, c := range []struct {
		body map[string]any
		id   string
	}{
		{map[string]any{}, "ActionParameterValueFormatError"},
		{map[string]any{"ImageURI": "ftp://x/y.bin"}, "ActionParameterValueFormatError"},
		{map[string]any{"ImageURI": fw + "/a.bin", "Bogus": true}, "ActionParameterUnknown"},
		{map[string]any{"ImageURI": fw + "/a.bin", "Targets": []string{"/redfish/v1/Systems/vm"}}, "ActionParameterValueNotInList"},
		{map[string]any{"ImageURI": fw + "/a.bin", "TransferProtocol": "NFS"}, "ActionParameterValueNotInList"},
	} {
		code, m := r.do("POST", rfSimpleUpd, c.body, true)
		r.wantError(code, m, 400, c.id)
	}
}

// TestRedfishBMCBIOSSettings: settings are pending (the Settings
// resource) until the next reset, checked against the registry, and
// ResetBios restores the defaults at the next reset.
func TestRedfishBMCBIOSSettings(t *testing.T) {
	r := newRFTest(t, rfServiceOptions{})
	settings := "/redfish/v1/Systems/vm/Bios/Settings"
	for _, c := range []struct {
		attrs map[string]any
		id    string
	}{
		{map[string]any{"BootMode": "Uefi"}, "PropertyNotWritable"},
		{map[string]any{"NumLock": "Blinking"}, "PropertyValueNotInList"},
		{map[string]any{"SerialConsoleBaud": "fast"}, "PropertyValueTypeError"},
		{map[string]any{"AssetTag": 7}, "PropertyValueTypeError"},
		{map[string]any{"Overclock": "Yes"}, "PropertyUnknown"},
	} {
		code, m := r.do("PATCH", settings, map[string]any{"Attributes": c.attrs}, true)
		r.wantError(code, m, 400, c.id)
	}
	if code, m := r.do("PATCH", settings, map[string]any{"Attributes": map[string]any{"ProcVirtualization": "Disabled", "AssetTag": "rack1"}}, true); code != 204 {
		t.Fatalf("PATCH: %d %v", code, m)
	}
	_, pending := r.do("GET", settings, nil, true)
	_, cur := r.do("GET", "/redfish/v1/Systems/vm/Bios", nil, true)
	if pending["Attributes"].(map[string]any)["ProcVirtualization"] != "Disabled" || cur["Attributes"].(map[string]any)["ProcVirtualization"] != "Enabled" {
		t.Fatalf("pending %v current %v", pending["Attributes"], cur["Attributes"])
	}
	r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, true)
	_, cur = r.do("GET", "/redfish/v1/Systems/vm/Bios", nil, true)
	if cur["Attributes"].(map[string]any)["ProcVirtualization"] != "Disabled" || cur["Attributes"].(map[string]any)["AssetTag"] != "rack1" {
		t.Fatalf("after the reset: %v", cur["Attributes"])
	}
	if _, pending = r.do("GET", settings, nil, true); len(pending["Attributes"].(map[string]any)) != 0 {
		t.Fatalf("pending settings left after the reset: %v", pending["Attributes"])
	}
	if code, m := r.do("POST", "/redfish/v1/Systems/vm/Bios/Actions/Bios.ResetBios", map[string]any{}, true); code != 204 {
		t.Fatalf("ResetBios: %d %v", code, m)
	}
	r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceRestart"}, true)
	if got := r.svc.biosSettings(); got["ProcVirtualization"] != "Enabled" || got["AssetTag"] != "" {
		t.Fatalf("after the factory reset: %v", got)
	}
}

// TestRedfishBMCThroughTheDriver: the redfish plugin's firmware and BIOS
// steps against the lab's BMC (no VM): the update reboots the machine
// because the BMC asks, and the versions and settings read back.
func TestRedfishBMCThroughTheDriver(t *testing.T) {
	fw := firmwareImages(t)
	r := newRFTest(t, rfServiceOptions{MaxMediaSize: 4096})
	d := rfdriver.NewDrivers(rfdriver.Options{PollInterval: 10 * time.Millisecond})
	defer d.Close(context.Background())
	tk := &driver.Task{NodeUUID: "n1", HardwareType: rfdriver.HardwareType, DriverInfo: map[string]any{
		"redfish_address": r.srv.URL, "redfish_username": "admin", "redfish_password": "s3cret", "redfish_system_id": "/redfish/v1/Systems/vm",
	}}
	ctx := context.Background()
	r.do("POST", "/redfish/v1/Systems/vm/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, true)
	r.hw.log()
	_, err := d.Firmware().ExecuteStep(ctx, tk, steps.Service, steps.Step{Interface: "firmware", Name: "update",
		Args: map[string]any{"settings": []any{map[string]any{"component": "bios", "url": fw + "/bios-3.0.bin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if calls := r.hw.log(); len(calls) != 2 || !strings.HasPrefix(calls[0], "stop") || !strings.HasPrefix(calls[1], "start") {
		t.Fatalf("the machine was not rebooted for the update: %q", calls)
	}
	if v := r.svc.firmwareVersions()["BIOS"]; v != "bios-3.0" {
		t.Fatalf("BIOS version %q", v)
	}
	_, err = d.BIOS().ExecuteStep(ctx, tk, steps.Service, steps.Step{Interface: "bios", Name: "apply_configuration",
		Args: map[string]any{"settings": []any{map[string]any{"name": "NumLock", "value": "Off"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.svc.biosSettings(); got["NumLock"] != "Off" {
		t.Fatalf("BIOS settings %v", got)
	}
	if _, err := d.Firmware().ExecuteStep(ctx, tk, steps.Service, steps.Step{Interface: "firmware", Name: "update",
		Args: map[string]any{"settings": []any{map[string]any{"component": "bios", "url": fw + "/missing.bin"}}}}); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("bad image through the driver: %v", err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
