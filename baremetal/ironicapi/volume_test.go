package ironicapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// powerNode sets a node's power state through the API and waits until
// the conductor has done it.
func powerNode(t *testing.T, l *lab, node, target string) {
	t.Helper()
	base := l.srv.URL + "/v1/nodes/" + node
	st, _, body := do(t, "PUT", base+"/states/power", "1.32", `{"target":"`+target+`"}`)
	wantRaw(t, "power "+target, st, http.StatusAccepted, body, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, body := do(t, "GET", base+"?fields=power_state,target_power_state,reservation", "1.32", "")
		doc := bodyMap(t, body)
		if doc["power_state"] == target && doc["target_power_state"] == nil && doc["reservation"] == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never reached %s: %s", node, target, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Volume connectors and targets as Ironic's API answers them (1.32):
// the documents, the schemas' refusals, the uniqueness rules and the
// conductor's power and state rules, with Ironic's codes and messages.
func TestVolumeAsIronicAnswers(t *testing.T) {
	l := newLab(t)
	base := l.srv.URL + "/v1/"
	node := newNode(t, l, "bfv", "")
	other := newNode(t, l, "bfv-other", "")
	const ghost = "aaaaaaaa-0000-4000-8000-00000000dead"

	for _, path := range []string{"volume", "volume/connectors", "volume/targets", "nodes/bfv/volume", "nodes/bfv/volume/targets"} {
		st, _, body := do(t, "GET", base+path, "1.31", "")
		wantRaw(t, path+" at 1.31", st, http.StatusNotFound, body, "")
	}
	for version, want := range map[string]bool{"1.31": false, "1.32": true} {
		_, _, body := do(t, "GET", base, version, "")
		if _, ok := bodyMap(t, body)["volume"]; ok != want {
			t.Fatalf("GET /v1/ at %s links volume: %v, want %v", version, ok, want)
		}
	}
	st, _, body := do(t, "GET", base+"volume", "1.32", "")
	root := bodyMap(t, body)
	if st != 200 || keys(root) != "connectors,links,targets" ||
		root["links"].([]any)[0].(map[string]any)["href"] != base+"volume/" ||
		root["connectors"].([]any)[1].(map[string]any)["href"] != l.srv.URL+"/volume/connectors" {
		t.Fatalf("GET /v1/volume = %d %s", st, body)
	}
	st, _, body = do(t, "GET", base+"nodes/bfv/volume", "1.32", "")
	if st != 200 || bodyMap(t, body)["targets"].([]any)[0].(map[string]any)["href"] != base+"nodes/bfv/volume/targets" {
		t.Fatalf("GET /v1/nodes/bfv/volume = %d %s", st, body)
	}

	st, hdr, body := do(t, "POST", base+"volume/connectors", "1.32", `{"node_uuid":"`+node+`","type":"iqn","connector_id":"iqn.2026-01.org.example:bfv","extra":{"key1":"value1","key2":"value2"}}`)
	wantRaw(t, "create connector", st, http.StatusCreated, body, "")
	vc := bodyMap(t, body)
	connector := vc["uuid"].(string)
	if hdr.Get("Location") != base+"volume/connectors/"+connector || keys(vc) != "connector_id,created_at,extra,links,node_uuid,type,updated_at,uuid" ||
		vc["node_uuid"] != node || vc["updated_at"] != nil {
		t.Fatalf("created connector = %s (Location %q)", body, hdr.Get("Location"))
	}
	st, _, body = do(t, "POST", base+"volume/targets", "1.32", `{"node_uuid":"`+node+`","volume_type":"iscsi","volume_id":"vol-1","boot_index":10,"properties":{"target_iqn":"iqn.x","auth_password":"s3cret"}}`)
	wantRaw(t, "create target", st, http.StatusCreated, body, "")
	vt := bodyMap(t, body)
	target := vt["uuid"].(string)
	if keys(vt) != "boot_index,created_at,extra,links,node_uuid,properties,updated_at,uuid,volume_id,volume_type" ||
		strings.Contains(body, "s3cret") || vt["properties"].(map[string]any)["auth_password"] != "******" {
		t.Fatalf("created target = %s; want every field and the password masked", body)
	}

	for _, tc := range []struct {
		name, method, path, version, body string
		status                            int
		text                              string
	}{
		{"same type and id", "POST", "volume/connectors", "1.32", `{"node_uuid":"` + other + `","type":"iqn","connector_id":"iqn.2026-01.org.example:bfv"}`, 409,
			"A volume connector with type iqn and connector ID iqn.2026-01.org.example:bfv already exists."},
		{"same uuid", "POST", "volume/connectors", "1.32", `{"uuid":"` + connector + `","node_uuid":"` + other + `","type":"ip","connector_id":"192.0.2.1"}`, 409,
			"A volume connector with UUID " + connector + " already exists."},
		{"no type", "POST", "volume/connectors", "1.32", `{"node_uuid":"` + node + `","connector_id":"x"}`, 400, "Schema error for connector: 'type' is a required property"},
		{"unknown member", "POST", "volume/connectors", "1.32", `{"node_uuid":"` + node + `","type":"ip","connector_id":"x","node":"y"}`, 400,
			"Schema error for connector: Additional properties are not allowed ('node' was unexpected)"},
		{"node by name", "POST", "volume/connectors", "1.32", `{"node_uuid":"bfv","type":"ip","connector_id":"x"}`, 400, "Expected UUID for node_uuid: bfv"},
		{"unknown node", "POST", "volume/connectors", "1.32", `{"node_uuid":"` + ghost + `","type":"ip","connector_id":"x"}`, 400,
			"Invalid input for field/attribute node_uuid. Value: '" + ghost + "'. "},
		{"type too long", "POST", "volume/connectors", "1.32", `{"node_uuid":"` + node + `","type":"` + strings.Repeat("t", 33) + `","connector_id":"x"}`, 400, "type"},
		{"same boot index", "POST", "volume/targets", "1.32", `{"node_uuid":"` + node + `","volume_type":"iscsi","volume_id":"vol-2","boot_index":10}`, 409,
			"A volume target with boot index '10' for the same node already exists."},
		{"boot index not an integer", "POST", "volume/targets", "1.32", `{"node_uuid":"` + node + `","volume_type":"iscsi","volume_id":"v","boot_index":"one"}`, 400,
			"Schema error for target: 'one' is not of type 'integer'"},
		{"no volume id", "POST", "volume/targets", "1.32", `{"node_uuid":"` + node + `","volume_type":"iscsi","boot_index":1}`, 400, "'volume_id' is a required property"},
		{"volume id too long", "POST", "volume/targets", "1.32", `{"node_uuid":"` + node + `","volume_type":"iscsi","volume_id":"` + strings.Repeat("v", 37) + `","boot_index":1}`, 400, "volume_id"},
		{"show by name", "GET", "volume/connectors/bfv", "1.32", "", 400, "Expected UUID for connector_uuid: bfv"},
		{"show unknown", "GET", "volume/targets/" + ghost, "1.32", "", 404, "Volume target " + ghost + " could not be found."},
		{"show under a node", "GET", "nodes/bfv/volume/connectors/" + connector, "1.32", "", 400, "Malformed request URI."},
		{"create under a node", "POST", "nodes/bfv/volume/targets", "1.32", `{}`, 400, "Malformed request URI."},
		{"sort by extra", "GET", "volume/connectors?sort_key=extra", "1.32", "", 400, "The sort_key value extra is an invalid field for sorting"},
		{"sort by properties", "GET", "volume/targets?sort_key=properties", "1.32", "", 400, "The sort_key value properties is an invalid field for sorting"},
		{"fields and detail", "GET", "volume/targets?fields=uuid&detail=true", "1.32", "", 400, "Can't fetch a subset of fields with 'detail' set"},
		{"unknown node filter", "GET", "volume/connectors?node=nope", "1.32", "", 404, "Node nope could not be found."},
		{"unknown marker", "GET", "volume/connectors?marker=" + ghost, "1.32", "", 404, "Volume connector " + ghost + " could not be found."},
		{"patch the uuid", "PATCH", "volume/connectors/" + connector, "1.32", `[{"op":"replace","path":"/uuid","value":"` + ghost + `"}]`, 400,
			"Cannot patch /uuid. Only the following can be updated: connector_id, extra, node_uuid, type"},
		{"patch to a node by name", "PATCH", "volume/connectors/" + connector, "1.32", `[{"op":"replace","path":"/node_uuid","value":"bfv"}]`, 400,
			"Expected a UUID for node_uuid, but received bfv."},
		{"patch to an unknown node", "PATCH", "volume/targets/" + target, "1.32", `[{"op":"replace","path":"/node_uuid","value":"` + ghost + `"}]`, 400,
			"Unable to apply the requested node_uuid '" + ghost + "'. Requested value was invalid."},
		{"patch away the type", "PATCH", "volume/connectors/" + connector, "1.32", `[{"op":"remove","path":"/type"}]`, 400, "Schema error for patch: 'type' is a required property"},
		// fake-hardware has no power state before a power action: Ironic
		// refuses an update unless the node is powered off.
		{"update, power unknown", "PATCH", "volume/connectors/" + connector, "1.32", `[{"op":"replace","path":"/connector_id","value":"iqn.new"}]`, 400,
			`The requested action "volume connector update" can not be performed on node "` + node + `" while it is in state "None".`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := do(t, tc.method, base+tc.path, tc.version, tc.body)
			wantRaw(t, tc.name, st, tc.status, body, tc.text)
			if strings.Contains(body, "s3cret") {
				t.Fatalf("%s: body quotes a secret: %s", tc.name, body)
			}
		})
	}

	// Updates once the node is powered off, as tempest makes them.
	powerNode(t, l, node, "power off")
	for _, tc := range []struct{ path, patch, check string }{
		{"volume/connectors/" + connector, `[{"op":"replace","path":"/connector_id","value":"iqn.new"}]`, `"connector_id":"iqn.new"`},
		{"volume/connectors/" + connector, `[{"op":"remove","path":"/extra/key2"}]`, `"extra":{"key1":"value1"}`},
		{"volume/connectors/" + connector, `[{"op":"add","path":"/extra/key3","value":"v3"},{"op":"add","path":"/extra/key3","value":"v3"}]`, `"key3":"v3"`},
		{"volume/connectors/" + connector, `[{"op":"remove","path":"/extra"}]`, `"extra":{}`},
		{"volume/targets/" + target, `[{"op":"replace","path":"/volume_id","value":"vol-9"},{"op":"replace","path":"/boot_index","value":0}]`, `"boot_index":0`},
	} {
		st, _, body := do(t, "PATCH", base+tc.path, "1.32", tc.patch)
		if st != 200 || !strings.Contains(body, tc.check) || strings.Contains(body, `"updated_at":null`) {
			t.Fatalf("PATCH %s %s = %d %s; want %s", tc.path, tc.patch, st, body, tc.check)
		}
	}

	// Listings: default fields, detail, the node filter by name or path,
	// paging.
	st, _, body = do(t, "POST", base+"volume/connectors", "1.32", `{"node_uuid":"`+other+`","type":"wwpn","connector_id":"50:01"}`)
	wantRaw(t, "second connector", st, http.StatusCreated, body, "")
	second := bodyMap(t, body)["uuid"].(string)
	for _, tc := range []struct {
		path, fields string
		want         []string
	}{
		{"volume/connectors", "connector_id,links,node_uuid,type,uuid", []string{connector, second}},
		{"volume/connectors?detail=true", "connector_id,created_at,extra,links,node_uuid,type,updated_at,uuid", []string{connector, second}},
		{"volume/connectors?node=bfv-other", "connector_id,links,node_uuid,type,uuid", []string{second}},
		{"nodes/bfv/volume/connectors?fields=type", "links,type", []string{connector}},
		{"volume/connectors?sort_key=type&sort_dir=desc", "connector_id,links,node_uuid,type,uuid", []string{second, connector}},
		{"volume/targets", "boot_index,links,node_uuid,uuid,volume_id,volume_type", []string{target}},
	} {
		st, _, body := do(t, "GET", base+tc.path, "1.32", "")
		doc := bodyMap(t, body)
		list, _ := doc["connectors"].([]any)
		if strings.Contains(tc.path, "targets") {
			list, _ = doc["targets"].([]any)
		}
		var ids []string
		for _, x := range list {
			m := x.(map[string]any)
			if keys(m) != tc.fields {
				t.Fatalf("GET %s: item fields %s, want %s", tc.path, keys(m), tc.fields)
			}
			self := m["links"].([]any)[0].(map[string]any)["href"].(string)
			ids = append(ids, self[strings.LastIndex(self, "/")+1:])
		}
		if st != 200 || strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("GET %s = %d %s; want %v", tc.path, st, body, tc.want)
		}
	}
	st, _, body = do(t, "GET", base+"nodes/"+node+"/volume/connectors?limit=1", "1.32", "")
	if next, _ := bodyMap(t, body)["next"].(string); st != 200 || next != base+"nodes/"+node+"/volume/connectors?limit=1&marker="+connector {
		t.Fatalf("next = %q (%d %s)", next, st, body)
	}

	// Power on: an update is refused; a deletion is too once the node
	// left enroll, manageable and adopt failed (Ironic master; in enroll
	// it is allowed whatever the power state).
	powerNode(t, l, node, "power on")
	st, _, body = do(t, "PATCH", base+"volume/targets/"+target, "1.32", `[{"op":"replace","path":"/volume_id","value":"vol-x"}]`)
	wantRaw(t, "update, powered on", st, http.StatusBadRequest, body,
		`The requested action "volume target update" can not be performed on node "`+node+`" while it is in state "power on".`)
	st, _, body = do(t, "DELETE", base+"volume/connectors/"+connector, "1.32", "")
	wantRaw(t, "delete in enroll, powered on", st, http.StatusNoContent, body, "")
	setState(t, l, node, "available", "", nil)
	st, _, body = do(t, "DELETE", base+"volume/targets/"+target, "1.32", "")
	wantRaw(t, "delete in available, powered on", st, http.StatusBadRequest, body,
		`The requested action "volume target deletion" can not be performed on node "`+node+`" while it is in state "power on".`)
	st, _, body = do(t, "DELETE", base+"nodes/bfv/volume/targets/"+target, "1.32", "")
	wantRaw(t, "delete under a node", st, http.StatusBadRequest, body, "Malformed request URI.")
	powerNode(t, l, node, "power off")
	st, _, body = do(t, "DELETE", base+"volume/targets/"+target, "1.32", "")
	wantRaw(t, "delete, powered off", st, http.StatusNoContent, body, "")
	st, _, body = do(t, "GET", base+"volume/targets/"+target, "1.32", "")
	wantRaw(t, "show deleted", st, http.StatusNotFound, body, "could not be found")

	// Deleting a node deletes its connectors and targets.
	st, _, body = do(t, "DELETE", base+"nodes/"+other, "1.32", "")
	wantRaw(t, "delete node", st, http.StatusNoContent, body, "")
	st, _, body = do(t, "GET", base+"volume/connectors/"+second, "1.32", "")
	wantRaw(t, "connector of a deleted node", st, http.StatusNotFound, body, "")
}

// The storage interface: noop is every node's default; cinder, which
// needs OpenStack's Block Storage service, is refused with a reason.
func TestStorageInterface(t *testing.T) {
	l := newLab(t)
	base := l.srv.URL + "/v1/nodes/"
	st, _, body := do(t, "POST", base, "1.33", `{"driver":"fake-hardware","name":"store"}`)
	if st != http.StatusCreated || bodyMap(t, body)["storage_interface"] != "noop" {
		t.Fatalf("create = %d %s; want storage_interface noop", st, body)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		text                     string
	}{
		{"create with cinder", "POST", "", `{"driver":"fake-hardware","storage_interface":"cinder"}`, 400, "Cinder"},
		{"patch to cinder", "PATCH", "store", `[{"op":"replace","path":"/storage_interface","value":"cinder"}]`, 400, "Cinder"},
		{"patch to noop", "PATCH", "store", `[{"op":"replace","path":"/storage_interface","value":"noop"}]`, 200, ""},
		{"before 1.33", "PATCH", "store", `[{"op":"replace","path":"/storage_interface","value":"noop"}]`, 406, ""},
	} {
		version := "1.33"
		if tc.name == "before 1.33" {
			version = "1.32"
		}
		st, _, body := do(t, tc.method, base+tc.path, version, tc.body)
		wantRaw(t, tc.name, st, tc.status, body, tc.text)
	}
}
