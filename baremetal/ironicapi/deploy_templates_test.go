package ironicapi_test

import (
	"net/http"
	"testing"
)

// gophercloud has no deploy templates package: the test speaks HTTP as
// python-ironicclient's "baremetal deploy template" commands do.
func TestDeployTemplates(t *testing.T) {
	l := newLab(t)
	base := l.srv.URL + "/v1/"
	const tpl = `{"name":"CUSTOM_RAID1","extra":{"a":"b"},"steps":[{"interface":"raid","step":"create_configuration",` +
		`"args":{"logical_disks":[{"size_gb":"MAX","raid_level":"1"}],"password":"s3cret"},"priority":90}]}`
	status, _, body := do(t, "POST", base+"deploy_templates", "1.54", tpl)
	wantRaw(t, "POST at 1.54", status, http.StatusNotFound, body, "")
	status, hdr, body := do(t, "POST", base+"deploy_templates", "1.55", tpl)
	v := bodyMap(t, body)
	if status != http.StatusCreated || v["name"] != "CUSTOM_RAID1" || hdr.Get("Location") != base+"deploy_templates/"+v["uuid"].(string) ||
		keys(v) != "created_at,extra,links,name,steps,updated_at,uuid" {
		t.Fatalf("POST = %d %s (Location %q)", status, body, hdr.Get("Location"))
	}
	step := v["steps"].([]any)[0].(map[string]any)
	if step["interface"] != "raid" || step["priority"] != float64(90) || step["args"].(map[string]any)["password"] != "******" {
		t.Fatalf("step = %v; want it with its secret argument masked", step)
	}
	uuid := v["uuid"].(string)

	for _, tc := range []struct {
		name, body string
		status     int
		text       string
	}{
		{"duplicate name", tpl, http.StatusConflict, "A deploy template with name CUSTOM_RAID1 already exists."},
		{"not a trait", `{"name":"raid1","steps":[{"interface":"raid","step":"x","args":{},"priority":1}]}`, http.StatusBadRequest, "not a valid trait name"},
		{"no steps", `{"name":"CUSTOM_B","steps":[]}`, http.StatusBadRequest, "at least one step"},
		{"no priority", `{"name":"CUSTOM_B","steps":[{"interface":"raid","step":"x","args":{}}]}`, http.StatusBadRequest, "priority"},
		{"unknown key", `{"name":"CUSTOM_B","foo":1,"steps":[{"interface":"raid","step":"x","args":{},"priority":1}]}`, http.StatusBadRequest, "foo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, "POST", base+"deploy_templates", "1.55", tc.body)
			wantRaw(t, "POST "+tc.name, status, tc.status, body, tc.text)
		})
	}

	status, _, body = do(t, "GET", base+"deploy_templates", "1.55", "")
	if list := bodyMap(t, body)["deploy_templates"].([]any); status != http.StatusOK || len(list) != 1 ||
		keys(list[0].(map[string]any)) != "links,name,uuid" {
		t.Fatalf("GET list = %d %s; want one template with Ironic's default fields", status, body)
	}
	status, _, body = do(t, "GET", base+"deploy_templates?detail=True", "1.55", "")
	if list := bodyMap(t, body)["deploy_templates"].([]any); status != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["steps"] == nil {
		t.Fatalf("GET detail = %d %s", status, body)
	}
	status, _, body = do(t, "GET", base+"deploy_templates/CUSTOM_RAID1?fields=name", "1.55", "")
	if status != http.StatusOK || keys(bodyMap(t, body)) != "links,name" {
		t.Fatalf("GET fields = %d %s", status, body)
	}

	status, _, body = do(t, "PATCH", base+"deploy_templates/"+uuid, "1.55",
		`[{"op":"replace","path":"/name","value":"CUSTOM_RAID10"},{"op":"replace","path":"/steps/0/priority","value":70}]`)
	if v := bodyMap(t, body); status != http.StatusOK || v["name"] != "CUSTOM_RAID10" || v["steps"].([]any)[0].(map[string]any)["priority"] != float64(70) {
		t.Fatalf("PATCH = %d %s", status, body)
	}
	status, _, body = do(t, "PATCH", base+"deploy_templates/"+uuid, "1.55", `[{"op":"replace","path":"/name","value":"bad"}]`)
	wantRaw(t, "PATCH to a bad name", status, http.StatusBadRequest, body, "not a valid trait name")
	status, _, body = do(t, "PATCH", base+"deploy_templates/"+uuid, "1.55", `[{"op":"replace","path":"/uuid","value":"x"}]`)
	wantRaw(t, "PATCH uuid", status, http.StatusBadRequest, body, "internal attribute")

	status, _, body = do(t, "DELETE", base+"deploy_templates/CUSTOM_RAID10", "1.55", "")
	if status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", status, body)
	}
	status, _, body = do(t, "GET", base+"deploy_templates/"+uuid, "1.55", "")
	wantRaw(t, "GET deleted", status, http.StatusNotFound, body, "could not be found")
}
