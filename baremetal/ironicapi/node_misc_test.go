package ironicapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestMaintenance(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	id := newNode(t, l, "mt", "")
	if err := nodes.SetMaintenance(ctx, sc, id, nodes.MaintenanceOpts{Reason: "disk swap"}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	n, _ := nodes.Get(ctx, sc, id).Extract()
	if !n.Maintenance || n.MaintenanceReason != "disk swap" {
		t.Fatalf("after set: %v %q", n.Maintenance, n.MaintenanceReason)
	}
	if err := nodes.UnsetMaintenance(ctx, sc, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	n, _ = nodes.Get(ctx, sc, id).Extract()
	if n.Maintenance || n.MaintenanceReason != "" {
		t.Fatalf("after unset: %v %q", n.Maintenance, n.MaintenanceReason)
	}
	// No body is a reason-less maintenance; a bad reason or key is a 400.
	cases := []struct {
		method, body string
		status       int
	}{
		{"PUT", "", 202},
		{"PUT", `{"reason": 5}`, 400},
		{"PUT", `{"why": "x"}`, 400},
		{"DELETE", "", 202},
	}
	for _, tc := range cases {
		st, _, body := do(t, tc.method, l.srv.URL+"/v1/nodes/mt/maintenance", "1.89", tc.body)
		if st != tc.status {
			t.Errorf("%s %q: %d %s", tc.method, tc.body, st, body)
		}
	}
	if st, _, _ := do(t, "PUT", l.srv.URL+"/v1/nodes/nope/maintenance", "1.89", ""); st != 404 {
		t.Errorf("unknown node: %d", st)
	}
}

func TestTraits(t *testing.T) {
	l := newLab(t)
	newNode(t, l, "tr", "")
	base := l.srv.URL + "/v1/nodes/tr/traits"
	get := func() []string {
		t.Helper()
		st, _, body := do(t, "GET", base, "1.37", "")
		if st != 200 {
			t.Fatalf("GET traits: %d %s", st, body)
		}
		var doc struct{ Traits []string }
		_ = json.Unmarshal([]byte(body), &doc)
		return doc.Traits
	}
	steps := []struct {
		name, method, path, version, body string
		status                            int
		want                              string // traits after, comma-joined
		fault                             string
	}{
		{"before 1.37", "GET", "", "1.36", "", 406, "", ""},
		{"PUT before 1.37", "PUT", "/CUSTOM_C", "1.36", "", 405, "", ""},
		{"PUT all before 1.37", "PUT", "", "1.36", `{"traits":["CUSTOM_B"]}`, 405, "", ""},
		{"DELETE before 1.37", "DELETE", "/CUSTOM_C", "1.36", "", 404, "", "could not be found"},
		{"empty at first", "GET", "", "1.37", "", 200, "", ""},
		{"replace all", "PUT", "", "1.37", `{"traits":["CUSTOM_B","HW_CPU_X86_VMX","CUSTOM_A"]}`, 204, "CUSTOM_A,CUSTOM_B,HW_CPU_X86_VMX", ""},
		{"add one", "PUT", "/CUSTOM_C", "1.37", "", 204, "CUSTOM_A,CUSTOM_B,CUSTOM_C,HW_CPU_X86_VMX", ""},
		{"add again with an empty object", "PUT", "/CUSTOM_C", "1.37", "{}", 204, "CUSTOM_A,CUSTOM_B,CUSTOM_C,HW_CPU_X86_VMX", ""},
		{"remove one", "DELETE", "/CUSTOM_B", "1.37", "", 204, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", ""},
		{"remove a missing one", "DELETE", "/CUSTOM_B", "1.37", "", 404, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "doesn't have a trait 'CUSTOM_B'"},
		{"lower case refused", "PUT", "/custom_x", "1.37", "", 400, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "custom_x"},
		{"bare CUSTOM_ refused", "PUT", "", "1.37", `{"traits":["CUSTOM_"]}`, 400, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "CUSTOM_"},
		{"too long refused", "PUT", "", "1.37", `{"traits":["CUSTOM_` + strings.Repeat("A", 249) + `"]}`, 400, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "trait"},
		{"body with one trait refused", "PUT", "/CUSTOM_D", "1.37", `{"traits":[]}`, 400, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "No body should be provided"},
		{"no list refused", "PUT", "", "1.37", `{}`, 400, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "A single node trait may be added"},
		{"more than 50 refused", "PUT", "", "1.37", traitList(51), 400, "CUSTOM_A,CUSTOM_C,HW_CPU_X86_VMX", "(51 vs. 50)"},
		{"50 accepted", "PUT", "", "1.37", traitList(50), 204, "", ""},
		{"the 51st refused", "PUT", "/CUSTOM_ZZ", "1.37", "", 400, "", "(51 vs. 50)"},
		{"remove all", "DELETE", "", "1.37", "", 204, "", ""},
	}
	for _, s := range steps {
		st, hdr, body := do(t, s.method, base+s.path, s.version, s.body)
		if st != s.status {
			t.Fatalf("%s: %d, want %d: %s", s.name, st, s.status, body)
		}
		if s.fault != "" && !strings.Contains(faultString(t, body), s.fault) {
			t.Fatalf("%s: fault %q, want %q", s.name, faultString(t, body), s.fault)
		}
		if s.method == "PUT" && s.path != "" && st == 204 && !strings.HasSuffix(hdr.Get("Location"), "/v1/nodes/tr/traits"+s.path) {
			t.Fatalf("%s: Location %q", s.name, hdr.Get("Location"))
		}
		if s.version == "1.36" {
			continue
		}
		got := strings.Join(get(), ",")
		if s.name == "50 accepted" || s.name == "the 51st refused" {
			if len(get()) != 50 {
				t.Fatalf("%s: %d traits", s.name, len(get()))
			}
			continue
		}
		if got != s.want {
			t.Fatalf("%s: traits %q, want %q", s.name, got, s.want)
		}
	}
	// Traits change in any provision state, as in Ironic (the lock is
	// still taken).
	setState(t, l, "tr", statemachine.Deploying, statemachine.Active, nil)
	if st, _, body := do(t, "PUT", base+"/CUSTOM_BUSY", "1.37", ""); st != 204 {
		t.Fatalf("trait on a deploying node: %d %s", st, body)
	}
	if got := get(); len(got) != 1 || got[0] != "CUSTOM_BUSY" {
		t.Fatalf("traits %v", got)
	}
	trNode, _ := l.c.Store().GetNode(context.Background(), "tr")
	if _, err := l.c.Store().ReserveNode(context.Background(), trNode.UUID, "other-host"); err != nil {
		t.Fatal(err)
	}
	st, hdr, body := do(t, "DELETE", base, "1.37", "")
	if st != 409 || hdr.Get("Retry-After") == "" || !strings.Contains(faultString(t, body), "locked by host other-host") {
		t.Fatalf("traits of a locked node: %d %v %s", st, hdr, body)
	}
	if err := l.c.Store().ReleaseNode(context.Background(), trNode.UUID, "other-host"); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := do(t, "DELETE", base, "1.37", ""); st != 204 {
		t.Fatalf("remove all: %d", st)
	}
	// The node shows its traits from 1.37.
	n, err := nodes.Get(context.Background(), l.client(t, "1.37"), "tr").Extract()
	if err != nil || len(n.Traits) != 0 {
		t.Fatalf("node traits %v %v", n.Traits, err)
	}
}

func traitList(n int) string {
	var ts []string
	for i := 0; i < n; i++ {
		ts = append(ts, fmt.Sprintf(`"CUSTOM_T%02d"`, i))
	}
	return `{"traits":[` + strings.Join(ts, ",") + `]}`
}

func TestInventory(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	id := newNode(t, l, "inv", "")
	sc := l.client(t, "1.81")
	_, err := nodes.GetInventory(ctx, sc, id).Extract()
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/inv/inventory", "1.81", "")
	if err == nil || st != 404 || faultString(t, body) != "Node inventory record for node "+id+" could not be found." {
		t.Fatalf("no inventory: %v %d %s", err, st, body)
	}
	inv := &baremetal.NodeInventory{
		Inventory:  json.RawMessage(`{"cpu":{"count":4,"architecture":"x86_64"},"memory":{"physical_mb":8192}}`),
		PluginData: json.RawMessage(`{"root_disk":{"name":"/dev/sda"}}`),
	}
	if err := l.c.Store().SaveNodeInventory(ctx, id, inv); err != nil {
		t.Fatal(err)
	}
	got, err := nodes.GetInventory(ctx, sc, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got.Inventory.CPU.Count != 4 || got.Inventory.Memory.PhysicalMb != 8192 || got.PluginData.RawMessage == nil {
		t.Fatalf("inventory %+v", got)
	}
	if st, _, _ := do(t, "GET", l.srv.URL+"/v1/nodes/inv/inventory", "1.80", ""); st != 404 {
		t.Fatalf("inventory before 1.81: %d", st)
	}
}

func TestHistory(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	id := newNode(t, l, "hist", "")
	for i := 0; i < 4; i++ {
		if err := l.c.SetMaintenance(ctx, id, i%2 == 0, fmt.Sprintf("reason %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	long := &baremetal.HistoryEntry{NodeUUID: id, Event: "long", EventType: "test", Severity: baremetal.HistoryWarning,
		Message: strings.Repeat("x", 300), Conductor: "api-test"}
	if err := l.c.Store().AddHistory(ctx, long); err != nil {
		t.Fatal(err)
	}
	entries, _ := l.c.Store().ListHistory(ctx, id, 0)
	if len(entries) < 6 {
		t.Fatalf("%d entries recorded", len(entries))
	}
	type entry struct {
		UUID, Event, Severity, Conductor string
		CreatedAt                        string  `json:"created_at"`
		EventTypeJSON                    *string `json:"event_type"`
	}
	list := func(query string) ([]entry, string) {
		st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/hist/history"+query, "1.78", "")
		if st != 200 {
			t.Fatalf("history%s: %d %s", query, st, body)
		}
		var doc struct {
			History []entry
			Next    string
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.History, doc.Next
	}
	all, next := list("")
	if len(all) != len(entries) || next != "" {
		t.Fatalf("%d entries (next %q), want %d", len(all), next, len(entries))
	}
	last := all[len(all)-1]
	if len(last.Event) != 254 || !strings.HasSuffix(last.Event, "...") || last.EventTypeJSON != nil || last.CreatedAt == "" {
		t.Fatalf("plain entry %+v (event %d chars)", last, len(last.Event))
	}
	// Paging by two, and detail.
	var paged []entry
	query := "?limit=2&detail=True"
	for i := 0; i < 10; i++ {
		page, next := list(query)
		paged = append(paged, page...)
		if next == "" {
			break
		}
		query = next[strings.Index(next, "?"):]
	}
	if len(paged) != len(all) || paged[0].UUID != all[0].UUID || paged[0].EventTypeJSON == nil || paged[len(paged)-1].Conductor != "api-test" {
		t.Fatalf("paged %d entries: %+v", len(paged), paged)
	}
	desc, _ := list("?sort_dir=desc")
	if desc[0].UUID != last.UUID {
		t.Fatalf("desc starts with %s, want %s", desc[0].UUID, last.UUID)
	}
	// One entry, in detail, and its refusals.
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/hist/history/"+last.UUID, "1.78", "")
	if st != 200 || !strings.Contains(body, strings.Repeat("x", 300)) || !strings.Contains(body, `"event_type":"test"`) {
		t.Fatalf("one entry: %d %s", st, body)
	}
	// An entry of another node is no entry of this one, as a marker or
	// read alone.
	otherID := newNode(t, l, "other", "")
	foreign := &baremetal.HistoryEntry{NodeUUID: otherID, Event: "elsewhere"}
	if err := l.c.Store().AddHistory(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	st, _, body = do(t, "GET", l.srv.URL+"/v1/nodes/other/history?detail=true", "1.78", "")
	if st != 200 || !strings.Contains(body, "elsewhere") {
		t.Fatalf("other node's history: %d %s", st, body)
	}
	var otherDoc struct{ History []entry }
	if err := json.Unmarshal([]byte(body), &otherDoc); err != nil {
		t.Fatal(err)
	}
	foreignUUID := otherDoc.History[len(otherDoc.History)-1].UUID
	// Before 1.115 a detailed entry has none of its fields.
	if strings.Contains(body, "duration_seconds") || strings.Contains(body, "target_provision_state") {
		t.Fatalf("history at 1.78 carries 1.115's fields: %s", body)
	}
	for _, tc := range []struct {
		path, version string
		status        int
	}{
		{"/history?marker=" + foreignUUID, "1.78", 404},
		{"/history/" + foreignUUID, "1.78", 404},
		{"/history", "1.77", 404},
		{"/history/99999999-0000-4000-8000-000000000000", "1.78", 404},
		{"/history?limit=0", "1.78", 400},
		{"/history?marker=bad", "1.78", 400},
		{"/history?marker=99999999-0000-4000-8000-000000000000", "1.78", 404},
		{"/history?sort_dir=sideways", "1.78", 400},
		{"/history?detail=perhaps", "1.78", 400},
	} {
		st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/hist"+tc.path, tc.version, "")
		if st != tc.status || faultString(t, body) == "" {
			t.Errorf("%s at %s: %d %s", tc.path, tc.version, st, body)
		}
	}
}

// TestHistoryFieldsAt1115 reads 1.115's history fields through the API,
// 1.113's project, and their absence at 1.112 and 1.114.
func TestHistoryFieldsAt1115(t *testing.T) {
	l := newLab(t)
	id := newNode(t, l, "hist115", "")
	if err := l.c.SetMaintenance(context.Background(), id, true, "checking"); err != nil {
		t.Fatal(err)
	}
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/hist115/history?detail=true", "1.115", "")
	var doc struct {
		History []struct {
			State    *string `json:"state"`
			Duration *int64  `json:"duration_seconds"`
		}
	}
	if st != 200 || json.Unmarshal([]byte(body), &doc) != nil || len(doc.History) == 0 {
		t.Fatalf("history at 1.115: %d %s", st, body)
	}
	for _, e := range doc.History {
		if e.State == nil || *e.State != "enroll" || e.Duration == nil || *e.Duration < 0 {
			t.Fatalf("entry at 1.115 without its state or duration: %s", body)
		}
	}
	for _, tc := range []struct {
		version           string
		project, duration bool
	}{
		{"1.112", false, false},
		{"1.113", true, false},
		{"1.114", true, false},
		{"1.115", true, true},
	} {
		st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/hist115/history?detail=true", tc.version, "")
		var doc struct{ History []map[string]any }
		if st != 200 || json.Unmarshal([]byte(body), &doc) != nil || len(doc.History) == 0 {
			t.Fatalf("history at %s: %d %s", tc.version, st, body)
		}
		e := doc.History[0]
		project, hasProject := e["project"]
		_, hasDuration := e["duration_seconds"]
		_, hasState := e["state"]
		if hasProject != tc.project || (hasProject && project != nil) || hasDuration != tc.duration || hasState != tc.duration {
			t.Errorf("entry at %s = %v; want project (null) %v, state and duration_seconds %v", tc.version, e, tc.project, tc.duration)
		}
		// Without detail none of them.
		_, _, body = do(t, "GET", l.srv.URL+"/v1/nodes/hist115/history", tc.version, "")
		if strings.Contains(body, `"project"`) || strings.Contains(body, "duration_seconds") {
			t.Errorf("entry without detail at %s carries detailed fields: %s", tc.version, body)
		}
	}
}
