package ironicapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestApplyPatchAsIronic(t *testing.T) {
	doc := `{"name":"a","extra":{"k":"v","list":[1,2]},"driver_info":{},"maintenance":false}`
	cases := []struct {
		name, patch, want, err string
	}{
		{"replace", `[{"op":"replace","path":"/name","value":"b"}]`, `{"name":"b","extra":{"k":"v","list":[1,2]},"driver_info":{},"maintenance":false}`, ""},
		{"add on an existing root key replaces", `[{"op":"add","path":"/name","value":"c"}]`, `{"name":"c","extra":{"k":"v","list":[1,2]},"driver_info":{},"maintenance":false}`, ""},
		{"new root attribute refused", `[{"op":"add","path":"/foo","value":1}]`, "", "Adding a new attribute (/foo) to the root of the resource is not allowed"},
		{"nested add", `[{"op":"add","path":"/driver_info/ipmi_address","value":"192.0.2.9"}]`, `{"name":"a","extra":{"k":"v","list":[1,2]},"driver_info":{"ipmi_address":"192.0.2.9"},"maintenance":false}`, ""},
		{"in order", `[{"op":"add","path":"/extra/x","value":1},{"op":"remove","path":"/extra/x"},{"op":"add","path":"/extra/list/-","value":3},{"op":"add","path":"/extra/list/0","value":0}]`, `{"name":"a","extra":{"k":"v","list":[0,1,2,3]},"driver_info":{},"maintenance":false}`, ""},
		{"remove root", `[{"op":"remove","path":"/name"}]`, `{"extra":{"k":"v","list":[1,2]},"driver_info":{},"maintenance":false}`, ""},
		{"replace missing nested", `[{"op":"replace","path":"/extra/none","value":1}]`, "", "can't replace a non-existent object 'none'"},
		{"remove missing", `[{"op":"remove","path":"/extra/none"}]`, "", "can't remove a non-existent object 'none'"},
		{"bad index", `[{"op":"replace","path":"/extra/list/9","value":1}]`, "", "can't replace outside of list"},
		{"through a scalar", `[{"op":"add","path":"/name/x","value":1}]`, "", "not an object or a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw []map[string]any
			if err := json.Unmarshal([]byte(tc.patch), &raw); err != nil {
				t.Fatal(err)
			}
			ops, err := parsePatch(raw, false)
			if err != nil {
				t.Fatal(err)
			}
			orig := mustJSON(t, doc)
			got, err := applyPatch(orig, ops)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, mustJSON(t, tc.want)) {
				t.Fatalf("got %v\nwant %s", got, tc.want)
			}
			if !reflect.DeepEqual(orig, mustJSON(t, doc)) {
				t.Fatal("the original document changed")
			}
		})
	}
}

func TestParsePatchRefusesWhatIronicRefuses(t *testing.T) {
	cases := []struct{ patch, err string }{
		{`[]`, "at least one operation"},
		{`[{"op":"move","path":"/a","from":"/b"}]`, "unexpected key"},
		{`[{"op":"copy","path":"/a"}]`, "is not one of"},
		{`[{"op":"add","path":"/a"}]`, "'value' is a required property"},
		{`[{"op":"add","path":"a","value":1}]`, "invalid path"},
		{`[{"op":"add","path":"/a~1b","value":1}]`, "invalid path"},
	}
	for _, tc := range cases {
		var raw []map[string]any
		if err := json.Unmarshal([]byte(tc.patch), &raw); err != nil {
			t.Fatal(err)
		}
		if _, err := parsePatch(raw, false); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.patch, err, tc.err)
		}
	}
	var rm []map[string]any
	_ = json.Unmarshal([]byte(`[{"op":"remove","path":"/a","value":null}]`), &rm)
	if ops, err := parsePatch(rm, false); err != nil || ops[0].HasValue {
		t.Fatalf("a remove with a value, as gophercloud sends it: %v %+v", err, ops)
	}
	var raw []map[string]any
	_ = json.Unmarshal([]byte(`[{"op":"add","path":"/extra/a~1b","value":1}]`), &raw)
	ops, err := parsePatch(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := applyPatch(map[string]any{"extra": map[string]any{}}, ops)
	if err != nil || got["extra"].(map[string]any)["a/b"] != 1.0 {
		t.Fatalf("escaped key at 1.98: %v %v", got, err)
	}
}

func FuzzApplyPatch(f *testing.F) {
	f.Add(`{"name":"a","extra":{"l":[1]}}`, `[{"op":"add","path":"/extra/l/-","value":2}]`)
	f.Add(`{"a":[[]]}`, `[{"op":"remove","path":"/a/0/0"}]`)
	f.Fuzz(func(t *testing.T, doc, patch string) {
		var d map[string]any
		var raw []map[string]any
		if json.Unmarshal([]byte(doc), &d) != nil || d == nil || json.Unmarshal([]byte(patch), &raw) != nil {
			return
		}
		before, _ := json.Marshal(d)
		for _, special := range []bool{false, true} {
			ops, err := parsePatch(raw, special)
			if err != nil {
				continue
			}
			out, err := applyPatch(d, ops)
			if err == nil {
				if _, err := json.Marshal(out); err != nil {
					t.Fatalf("patched document does not encode: %v", err)
				}
			}
		}
		after, _ := json.Marshal(d)
		if string(before) != string(after) {
			t.Fatal("applyPatch changed its input")
		}
	})
}
