package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// testHistoryFields checks Ironic 1.115's fields of history entries: the
// node's state and target as the entry is written and the time the node
// had spent in its provision state, filled by the store from the node
// (by AddHistory from its row, by UpdateNodeRecording from the copy
// before the write), or kept as the caller gave them.
func testHistoryFields(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, func(n *baremetal.Node) { n.ProvisionState, n.TargetProvisionState = "verifying", "manageable" })
	stamped := n.ProvisionUpdatedAt
	if stamped.IsZero() {
		t.Fatal("a created node has no provision_updated_at")
	}
	clock.Advance(90 * time.Second)
	e := &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "power on"}
	if err := s.AddHistory(ctx(t), e); err != nil {
		t.Fatal(err)
	}
	wantFields(t, "AddHistory", e, "verifying", "manageable", 90*time.Second)
	got, err := s.GetHistory(ctx(t), n.UUID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantFields(t, "GetHistory", got, "verifying", "manageable", 90*time.Second)

	// An entry dated before the stamp (a boot stage reported late) has
	// no negative duration.
	early := &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "dhcp ack", CreatedAt: stamped.Add(-time.Second)}
	if err := s.AddHistory(ctx(t), early); err != nil {
		t.Fatal(err)
	}
	wantFields(t, "AddHistory before the stamp", early, "verifying", "manageable", 0)

	// What the caller gives is kept.
	d := 1500 * time.Millisecond
	given := &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "given", State: "deploying", TargetState: "active", Duration: &d}
	if err := s.AddHistory(ctx(t), given); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetHistory(ctx(t), n.UUID, given.ID)
	wantFields(t, "given fields", got, "deploying", "active", d)

	bad := -time.Second
	wantField(t, s.AddHistory(ctx(t), &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "x", Duration: &bad}), "duration")

	// A transition's entry: the new states, and the time spent in the
	// state the node left.
	if rs, ok := s.(baremetal.RecordingNodeStore); ok {
		clock.Advance(30 * time.Second)
		n.ProvisionState, n.TargetProvisionState = "manageable", ""
		tr := &baremetal.HistoryEntry{Event: "provision state manageable"}
		if err := rs.UpdateNodeRecording(ctx(t), n, "", tr); err != nil {
			t.Fatal(err)
		}
		wantFields(t, "UpdateNodeRecording", tr, "manageable", "", 2*time.Minute)
		got, _ = s.GetHistory(ctx(t), n.UUID, tr.ID)
		wantFields(t, "UpdateNodeRecording, read back", got, "manageable", "", 2*time.Minute)
		if !n.ProvisionUpdatedAt.Equal(clock.Now()) {
			t.Fatalf("provision_updated_at %v after the transition, want %v", n.ProvisionUpdatedAt, clock.Now())
		}
	}
}

func wantFields(t *testing.T, what string, e *baremetal.HistoryEntry, state, target string, d time.Duration) {
	t.Helper()
	if string(e.State) != state || string(e.TargetState) != target || e.Duration == nil || *e.Duration != d {
		dur := "nil"
		if e.Duration != nil {
			dur = e.Duration.String()
		}
		t.Fatalf("%s: state %q target %q duration %s; want %q %q %v", what, e.State, e.TargetState, dur, state, target, d)
	}
}

// testHistoryPages checks PageHistory: keyset pages by creation time (an
// entry recorded late sorts by its time, not its insertion), by ID, both
// directions, and its errors.
func testHistoryPages(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, nil)
	other := mustNode(t, s, nil)
	base := clock.Now()
	// Insertion order e0..e6; creation times put e3 first and give e4
	// and e5 the same time.
	offsets := []time.Duration{2, 3, 4, 1, 5, 5, 6}
	ids := make([]int64, len(offsets))
	for i, off := range offsets {
		e := &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: fmt.Sprintf("e%d", i), CreatedAt: base.Add(off * time.Second)}
		if err := s.AddHistory(ctx(t), e); err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	foreign := &baremetal.HistoryEntry{NodeUUID: other.UUID, Event: "other node"}
	if err := s.AddHistory(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	byTime := []string{"e3", "e0", "e1", "e2", "e4", "e5", "e6"}
	byID := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6"}
	reversed := func(s []string) []string {
		out := make([]string, len(s))
		for i, v := range s {
			out[len(s)-1-i] = v
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    baremetal.HistoryPage
		want []string
	}{
		{"by time", baremetal.HistoryPage{}, byTime},
		{"by time, newest first", baremetal.HistoryPage{Descending: true}, reversed(byTime)},
		{"by id", baremetal.HistoryPage{ByID: true}, byID},
		{"by id, newest first", baremetal.HistoryPage{ByID: true, Descending: true}, reversed(byID)},
	} {
		for _, limit := range []int{1, 2, 3, 7, 0} {
			t.Run(fmt.Sprintf("%s/limit %d", tc.name, limit), func(t *testing.T) {
				p := tc.p
				p.Limit = limit
				var got []string
				for pages := 0; ; pages++ {
					if pages > len(tc.want)+1 {
						t.Fatalf("no end after %d pages: %v", pages, got)
					}
					page, err := s.PageHistory(ctx(t), n.UUID, p)
					if err != nil {
						t.Fatal(err)
					}
					if limit > 0 && len(page) > limit {
						t.Fatalf("page of %d entries, limit %d", len(page), limit)
					}
					for _, e := range page {
						got = append(got, e.Event)
					}
					if len(page) == 0 || limit == 0 {
						break
					}
					p.After = page[len(page)-1].ID
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("pages gave %v, want %v", got, tc.want)
				}
			})
		}
	}

	// The newest-first page of ListHistory is unchanged: insertion order.
	last, err := s.ListHistory(ctx(t), n.UUID, 3)
	if err != nil || len(last) != 3 || last[0].Event != "e4" || last[2].Event != "e6" {
		t.Fatalf("ListHistory(3) = %v, %v", last, err)
	}

	var nf *baremetal.NotFoundError
	if _, err := s.PageHistory(ctx(t), n.UUID, baremetal.HistoryPage{After: foreign.ID}); !errors.As(err, &nf) || nf.Kind != "history" {
		t.Fatalf("page after another node's entry = %v, want a history *NotFoundError", err)
	}
	if _, err := s.PageHistory(ctx(t), n.UUID, baremetal.HistoryPage{After: ids[len(ids)-1] + 1000}); !errors.As(err, &nf) || nf.Kind != "history" {
		t.Fatalf("page after an unknown entry = %v, want a history *NotFoundError", err)
	}
	const unknown = "99999999-0000-4000-8000-000000000000"
	if _, err := s.PageHistory(ctx(t), unknown, baremetal.HistoryPage{}); !errors.As(err, &nf) || nf.Kind != "node" {
		t.Fatalf("page of an unknown node = %v, want a node *NotFoundError", err)
	}
	if _, err := s.PageHistory(ctx(t), unknown, baremetal.HistoryPage{After: ids[0]}); !errors.As(err, &nf) || nf.Kind != "node" {
		t.Fatalf("page of an unknown node after an entry = %v, want a node *NotFoundError", err)
	}
	if _, err := s.GetHistory(ctx(t), n.UUID, foreign.ID); !errors.As(err, &nf) || nf.Kind != "history" {
		t.Fatalf("GetHistory of another node's entry = %v, want a history *NotFoundError", err)
	}
	if _, err := s.GetHistory(ctx(t), unknown, ids[0]); !errors.As(err, &nf) || nf.Kind != "node" {
		t.Fatalf("GetHistory of an unknown node = %v, want a node *NotFoundError", err)
	}
	// An empty history is an empty page.
	empty := mustNode(t, s, nil)
	if page, err := s.PageHistory(ctx(t), empty.UUID, baremetal.HistoryPage{Limit: 5}); err != nil || len(page) != 0 {
		t.Fatalf("page of an empty history = %v, %v", page, err)
	}
}
