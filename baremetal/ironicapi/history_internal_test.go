package ironicapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/anvilmetal/anvil/baremetal"
)

// TestHistoryUUIDCarriesTheEntry checks that an entry's UUID names the
// entry's row, for its node only, and that nothing else decodes.
func TestHistoryUUIDCarriesTheEntry(t *testing.T) {
	const node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	const other = "2be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	for _, id := range []int64{1, 2, 255, 256, 1 << 31, 1<<62 - 1} {
		s := historyUUID(node, id)
		u, err := uuid.Parse(s)
		if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("historyUUID(%d) = %s: version %d variant %v, %v; want an RFC 9562 version-8 UUID", id, s, u.Version(), u.Variant(), err)
		}
		if got, ok := historyID(node, s); !ok || got != id {
			t.Errorf("historyID(historyUUID(%d)) = %d, %v", id, got, ok)
		}
		if got, ok := historyID(strings.ToUpper(node), strings.ToUpper(s)); !ok || got != id {
			t.Errorf("historyID in upper case = %d, %v", got, ok)
		}
		if _, ok := historyID(other, s); ok {
			t.Errorf("entry %d of one node decodes for another", id)
		}
	}
	if historyUUID(node, 7) != historyUUID(strings.ToUpper(node), 7) || historyUUID(node, 7) == historyUUID(other, 7) {
		t.Error("history UUIDs are not one per node and entry")
	}
	for _, bad := range []string{"", "not-a-uuid", "99999999-0000-4000-8000-000000000000", uuid.NewSHA1(uuid.Nil, []byte("7")).String(),
		historyUUID(node, 0)} {
		if id, ok := historyID(node, bad); ok {
			t.Errorf("historyID(%q) = %d, want none", bad, id)
		}
	}
}

// TestHistoryViewFields checks the detailed view's 1.115 fields, their
// absence before 1.115 and without detail.
func TestHistoryViewFields(t *testing.T) {
	d := 95*time.Second + 700*time.Millisecond
	e := &baremetal.HistoryEntry{ID: 3, NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Event: "provision state active", Severity: "INFO",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), State: "active", Duration: &d}
	view := func(minor int, detail bool, e *baremetal.HistoryEntry) map[string]any {
		rq := &request{h: &Handler{}, r: httptest.NewRequest("GET", "/v1/nodes/x/history", nil), v: Version{1, minor}}
		return rq.historyView(e.NodeUUID, e, detail)
	}
	v := view(historyFieldsVersion, true, e)
	if v["state"] != "active" || v["target_provision_state"] != nil || v["duration_seconds"] != int64(95) {
		t.Fatalf("1.115 detail = %v; want state active, target null, duration_seconds 95", v)
	}
	unknown := *e
	unknown.Duration, unknown.State = nil, ""
	if v := view(historyFieldsVersion, true, &unknown); v["duration_seconds"] != nil || v["state"] != nil {
		t.Fatalf("1.115 detail without duration = %v; want nulls", v)
	} else if _, ok := v["duration_seconds"]; !ok {
		t.Fatal("1.115 detail leaves duration_seconds out; want it null")
	}
	for _, tc := range []struct {
		minor  int
		detail bool
	}{{historyFieldsVersion - 1, true}, {historyFieldsVersion, false}, {78, true}} {
		v := view(tc.minor, tc.detail, e)
		for _, f := range []string{"state", "target_provision_state", "duration_seconds"} {
			if _, ok := v[f]; ok {
				t.Errorf("1.%d detail=%v has %s", tc.minor, tc.detail, f)
			}
		}
	}
}
