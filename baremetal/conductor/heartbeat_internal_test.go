package conductor

import (
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// TestHeartbeatDue checks which heartbeats become history lines: the
// first, then one at least heartbeatHistoryInterval after the last
// recorded, and any after an unreadable or future stamp.
func TestHeartbeatDue(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stamp := func(at time.Time) map[string]any {
		return map[string]any{heartbeatRecordedKey: at.Format(time.RFC3339Nano)}
	}
	for _, tc := range []struct {
		name string
		dii  map[string]any
		now  time.Time
		want bool
	}{
		{"never recorded", nil, t0, true},
		{"just recorded", stamp(t0), t0.Add(time.Second), false},
		{"just under the interval", stamp(t0), t0.Add(heartbeatHistoryInterval - time.Millisecond), false},
		{"at the interval", stamp(t0), t0.Add(heartbeatHistoryInterval), true},
		{"IPA's pace", stamp(t0), t0.Add(30 * time.Second), true},
		{"unreadable stamp", map[string]any{heartbeatRecordedKey: "yesterday"}, t0, true},
		{"stamp in the future", stamp(t0.Add(time.Hour)), t0, true},
	} {
		if got := heartbeatDue(&baremetal.Node{DriverInternalInfo: tc.dii}, tc.now); got != tc.want {
			t.Errorf("%s: heartbeatDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
