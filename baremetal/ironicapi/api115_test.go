package ironicapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/anvilmetal/anvil/driver/fake"
)

// TestPortDynamicPortgroupAt1111 checks 1.111's port field
// available_for_dynamic_portgroup (Ironic's default true, writable by
// create and PATCH) and port group field dynamic_portgroup (read-only,
// false), each hidden and refused below 1.111.
func TestPortDynamicPortgroupAt1111(t *testing.T) {
	l := newLab(t)
	id := newNode(t, l, "dynpg", "")
	base := l.srv.URL + "/v1/"
	st, _, body := do(t, "POST", base+"ports", "1.111", `{"address":"52:54:00:11:11:01","node_uuid":"`+id+`"}`)
	wantRaw(t, "create at 1.111", st, http.StatusCreated, body, "")
	p := bodyMap(t, body)
	if p["available_for_dynamic_portgroup"] != true {
		t.Fatalf("port at 1.111 = %v; want available_for_dynamic_portgroup true, Ironic's default", p)
	}
	uuid := p["uuid"].(string)
	st, _, body = do(t, "GET", base+"ports/"+uuid, "1.110", "")
	if _, ok := bodyMap(t, body)["available_for_dynamic_portgroup"]; st != 200 || ok {
		t.Fatalf("port at 1.110 = %d %s; want the field hidden", st, body)
	}
	st, _, body = do(t, "PATCH", base+"ports/"+uuid, "1.111", `[{"op":"replace","path":"/available_for_dynamic_portgroup","value":false}]`)
	if st != 200 || bodyMap(t, body)["available_for_dynamic_portgroup"] != false {
		t.Fatalf("PATCH at 1.111 = %d %s; want false", st, body)
	}
	st, _, body = do(t, "GET", base+"ports/"+uuid+"?fields=available_for_dynamic_portgroup", "1.111", "")
	if m := bodyMap(t, body); st != 200 || m["available_for_dynamic_portgroup"] != false || keys(m) != "available_for_dynamic_portgroup,links" {
		t.Fatalf("?fields at 1.111 = %d %s; want the stored false", st, body)
	}
	st, _, body = do(t, "POST", base+"ports", "1.111", `{"address":"52:54:00:11:11:02","node_uuid":"`+id+`","available_for_dynamic_portgroup":false}`)
	if st != http.StatusCreated || bodyMap(t, body)["available_for_dynamic_portgroup"] != false {
		t.Fatalf("create with false = %d %s", st, body)
	}
	for _, tc := range []struct {
		name, method, path, version, body string
		status                            int
		text                              string
	}{
		{"create below 1.111", "POST", "ports", "1.110", `{"address":"52:54:00:11:11:03","node_uuid":"` + id + `","available_for_dynamic_portgroup":true}`, 406, ""},
		{"PATCH below 1.111", "PATCH", "ports/" + uuid, "1.110", `[{"op":"replace","path":"/available_for_dynamic_portgroup","value":true}]`, 406, ""},
		{"fields below 1.111", "GET", "ports/" + uuid + "?fields=available_for_dynamic_portgroup", "1.110", "", 406, ""},
		{"not a boolean", "POST", "ports", "1.111", `{"address":"52:54:00:11:11:04","node_uuid":"` + id + `","available_for_dynamic_portgroup":"yes"}`, 400, "is not of type 'boolean'"},
	} {
		st, _, body := do(t, tc.method, base+tc.path, tc.version, tc.body)
		wantRaw(t, tc.name, st, tc.status, body, tc.text)
	}

	st, _, body = do(t, "POST", base+"portgroups", "1.111", `{"node_uuid":"`+id+`","name":"bond0"}`)
	wantRaw(t, "portgroup create", st, http.StatusCreated, body, "")
	if g := bodyMap(t, body); g["dynamic_portgroup"] != false {
		t.Fatalf("portgroup at 1.111 = %v; want dynamic_portgroup false", g)
	}
	st, _, body = do(t, "GET", base+"portgroups/bond0", "1.110", "")
	if _, ok := bodyMap(t, body)["dynamic_portgroup"]; st != 200 || ok {
		t.Fatalf("portgroup at 1.110 = %d %s; want dynamic_portgroup hidden", st, body)
	}
	st, _, body = do(t, "PATCH", base+"portgroups/bond0", "1.111", `[{"op":"replace","path":"/dynamic_portgroup","value":true}]`)
	wantRaw(t, "PATCH dynamic_portgroup", st, http.StatusBadRequest, body, "dynamic_portgroup")
	st, _, body = do(t, "GET", base+"portgroups/bond0?fields=dynamic_portgroup", "1.110", "")
	wantRaw(t, "portgroup ?fields below 1.111", st, http.StatusNotAcceptable, body, "")
}

// TestRunbookTraitsAt1112 checks 1.112's runbooks: description and
// traits hidden below it, names any logical name, the traits
// sub-resource, and the trait rule a clean applies at each version.
func TestRunbookTraitsAt1112(t *testing.T) {
	l := newLab(t)
	base := l.srv.URL + "/v1/"
	steps := `"steps":[{"interface":"bios","step":"factory_reset","args":{},"order":1}]`
	for _, tc := range []struct {
		name, version, body string
		status              int
		text                string
	}{
		{"description below 1.112", "1.111", `{"name":"CUSTOM_A","description":"d",` + steps + `}`, 400, "description"},
		{"logical name below 1.112", "1.111", `{"name":"fw-reset",` + steps + `}`, 400, "name"},
		{"traits in a create", "1.112", `{"name":"fw-reset","traits":["CUSTOM_A"],` + steps + `}`, 400, "traits"},
		{"description too long", "1.112", `{"name":"fw-reset","description":"` + strings.Repeat("d", 256) + `",` + steps + `}`, 400, "description"},
		{"not a logical name", "1.112", `{"name":"fw reset",` + steps + `}`, 400, "name"},
	} {
		st, _, body := do(t, "POST", base+"runbooks", tc.version, tc.body)
		wantRaw(t, tc.name, st, tc.status, body, tc.text)
	}
	st, _, body := do(t, "POST", base+"runbooks", "1.112", `{"name":"fw-reset","description":"resets the BIOS",`+steps+`}`)
	wantRaw(t, "create at 1.112", st, http.StatusCreated, body, "")
	rb := bodyMap(t, body)
	if rb["description"] != "resets the BIOS" || rb["traits"] == nil || len(rb["traits"].([]any)) != 0 {
		t.Fatalf("runbook at 1.112 = %v; want its description and no traits", rb)
	}
	st, _, body = do(t, "GET", base+"runbooks/fw-reset", "1.111", "")
	if m := bodyMap(t, body); st != 200 || m["description"] != nil || m["traits"] != nil {
		t.Fatalf("runbook at 1.111 = %d %s; want description and traits hidden", st, body)
	}
	st, _, body = do(t, "PATCH", base+"runbooks/fw-reset", "1.111", `[{"op":"replace","path":"/description","value":"x"}]`)
	wantRaw(t, "PATCH description at 1.111", st, http.StatusBadRequest, body, "Cannot patch /description. Only the following can be updated: disable_ramdisk, extra, name, owner, public, steps")
	st, _, body = do(t, "PATCH", base+"runbooks/fw-reset", "1.112", `[{"op":"replace","path":"/description","value":"wipes"}]`)
	if st != 200 || bodyMap(t, body)["description"] != "wipes" {
		t.Fatalf("PATCH description at 1.112 = %d %s", st, body)
	}
	st, _, body = do(t, "PATCH", base+"runbooks/fw-reset", "1.112", `[{"op":"add","path":"/traits","value":["CUSTOM_A"]}]`)
	wantRaw(t, "PATCH traits", st, http.StatusBadRequest, body, "Cannot patch /traits.")

	// The traits sub-resource.
	tr := base + "runbooks/fw-reset/traits"
	st, _, body = do(t, "GET", tr, "1.111", "")
	wantRaw(t, "traits at 1.111", st, http.StatusNotFound, body, "")
	for _, tc := range []struct {
		what, method, url, body string
		status                  int
		traits                  string
	}{
		{"replace", "PUT", tr, `{"traits":["CUSTOM_RACK2","CUSTOM_RACK1"]}`, 204, "CUSTOM_RACK1,CUSTOM_RACK2"},
		{"add one", "PUT", tr + "/CUSTOM_RACK3", "", 204, "CUSTOM_RACK1,CUSTOM_RACK2,CUSTOM_RACK3"},
		{"add one again", "PUT", tr + "/CUSTOM_RACK3", "", 204, "CUSTOM_RACK1,CUSTOM_RACK2,CUSTOM_RACK3"},
		{"remove one", "DELETE", tr + "/CUSTOM_RACK2", "", 204, "CUSTOM_RACK1,CUSTOM_RACK3"},
		{"remove one it lacks", "DELETE", tr + "/CUSTOM_NONE", "", 204, "CUSTOM_RACK1,CUSTOM_RACK3"},
		{"bad trait", "PUT", tr + "/lower", "", 400, "CUSTOM_RACK1,CUSTOM_RACK3"},
		{"bad list", "PUT", tr, `{"traits":"CUSTOM_X"}`, 400, "CUSTOM_RACK1,CUSTOM_RACK3"},
		{"no list", "PUT", tr, `{}`, 400, "CUSTOM_RACK1,CUSTOM_RACK3"},
		{"body with one", "PUT", tr + "/CUSTOM_X", `{"traits":["CUSTOM_Y"]}`, 400, "CUSTOM_RACK1,CUSTOM_RACK3"},
	} {
		st, _, body := do(t, tc.method, tc.url, "1.112", tc.body)
		if st != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.what, st, body, tc.status)
		}
		_, _, body = do(t, "GET", tr, "1.112", "")
		var got []string
		for _, x := range bodyMap(t, body)["traits"].([]any) {
			got = append(got, x.(string))
		}
		if strings.Join(got, ",") != tc.traits {
			t.Fatalf("%s: traits %v, want %s", tc.what, got, tc.traits)
		}
	}
	_, hdr, _ := do(t, "PUT", tr+"/CUSTOM_RACK4", "1.112", "")
	if !strings.HasSuffix(hdr.Get("Location"), "/v1/runbooks/fw-reset/traits/CUSTOM_RACK4") {
		t.Errorf("Location of an added trait = %q", hdr.Get("Location"))
	}

	// Cleaning with the runbook: at 1.112 a node with one of its traits;
	// before, a node with its name as a trait (a logical name can never
	// be one).
	id := newNode(t, l, "rb112", "")
	node := base + "nodes/" + id
	st, _, body = do(t, "PUT", node+"/states/provision", "1.112", `{"target":"manage"}`)
	wantRaw(t, "manage", st, http.StatusAccepted, body, "")
	waitProvision(t, l, id, "manageable")
	clean := `{"target":"clean","runbook":"fw-reset"}`
	st, _, body = do(t, "PUT", node+"/states/provision", "1.112", clean)
	wantRaw(t, "clean without a shared trait", st, http.StatusBadRequest, body, "The node does not have any of the runbook's traits ['CUSTOM_RACK1', 'CUSTOM_RACK3', 'CUSTOM_RACK4']")
	st, _, body = do(t, "PUT", node+"/traits/CUSTOM_RACK3", "1.112", "")
	wantRaw(t, "node trait", st, http.StatusNoContent, body, "")
	st, _, body = do(t, "PUT", node+"/states/provision", "1.111", clean)
	wantRaw(t, "clean at 1.111 by name", st, http.StatusBadRequest, body, "Please ask an administrator to add it to your node traits.")
	st, _, body = do(t, "PUT", node+"/states/provision", "1.112", clean)
	wantRaw(t, "clean at 1.112", st, http.StatusAccepted, body, "")
	waitProvision(t, l, id, "manageable")
	st, _, body = do(t, "DELETE", tr, "1.112", "")
	wantRaw(t, "remove all", st, http.StatusNoContent, body, "")
	st, _, body = do(t, "PUT", node+"/states/provision", "1.112", clean)
	wantRaw(t, "clean with a runbook without traits", st, http.StatusBadRequest, body, "has no traits configured")
}

// waitProvision waits until node id rests in state.
func waitProvision(t *testing.T, l *lab, id, state string) {
	t.Helper()
	for range 400 {
		n, err := l.c.Store().GetNode(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if string(n.ProvisionState) == state && n.TargetProvisionState == "" {
			return
		}
		if strings.Contains(string(n.ProvisionState), "failed") {
			t.Fatalf("node %s: %s", n.ProvisionState, n.LastError)
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("node %s never reached %s", id, state)
}

// TestFirmwareIdentityAt1114 checks 1.114's firmware component fields:
// vendor, model and serial_number (the fake BMC names its model, the BIOS
// nothing), absent before and refused in ?fields with Ironic's 400.
func TestFirmwareIdentityAt1114(t *testing.T) {
	l, _, _ := syncLab(t)
	n := syncNode(t, l.client(t, "1.89"), nodes.CreateOpts{Name: "fw114"})
	url := l.srv.URL + "/v1/nodes/" + n.UUID + "/firmware"
	st, _, body := do(t, "GET", url, "1.114", "")
	comps := jsonOf(t, body)["firmware"].([]any)
	if st != 200 || len(comps) != 2 {
		t.Fatalf("firmware at 1.114: %d %s", st, body)
	}
	bios, bmc := comps[0].(map[string]any), comps[1].(map[string]any)
	if bios["component"] != "bios" || bmc["component"] != "bmc" {
		t.Fatalf("components %v", comps)
	}
	for _, f := range []string{"vendor", "model", "serial_number"} {
		if v, ok := bios[f]; !ok || v != nil {
			t.Errorf("bios %s = %v (present %v); want null", f, v, ok)
		}
	}
	if bmc["model"] != fake.FakeBMCModel || bmc["vendor"] != nil || bmc["serial_number"] != nil {
		t.Errorf("bmc at 1.114 = %v; want its model alone", bmc)
	}
	st, _, body = do(t, "GET", url, "1.113", "")
	if e := jsonOf(t, body)["firmware"].([]any)[1].(map[string]any); st != 200 || e["model"] != nil || strings.Contains(body, "serial_number") {
		t.Errorf("firmware at 1.113 = %d %s; want no identity fields", st, body)
	}
	st, _, body = do(t, "GET", url+"?fields=component,serial_number,model", "1.113", "")
	wantRaw(t, "?fields at 1.113", st, http.StatusBadRequest, body, "Fields model, serial_number are not allowed in this API version. They require at least API version 1.114.")
	st, _, body = do(t, "GET", url+"?fields=component,model", "1.114", "")
	if e := jsonOf(t, body)["firmware"].([]any)[1].(map[string]any); st != 200 || e["model"] != fake.FakeBMCModel || e["vendor"] != nil {
		t.Errorf("?fields at 1.114 = %d %s", st, body)
	}
}
