package conductor

import (
	"context"
	"slices"
	"testing"
)

// TestAgentJobsGoBeforeQueuedOperations: a heartbeat or a finished
// command queued behind operations (intents, takeovers) is handed to the
// next free worker before them, each lane in its own order. A heartbeat
// that waited behind a backlog of operations, each holding a worker for
// seconds, went unprocessed past the callback timeout on a loaded
// conductor, failing its node (the chaos test's 500 nodes under -race).
func TestAgentJobsGoBeforeQueuedOperations(t *testing.T) {
	q := newJobQueue()
	for _, j := range []job{
		{uuid: "a"}, {uuid: "b", kind: jobTakeover}, {uuid: "h1", kind: jobHeartbeat},
		{uuid: "c"}, {uuid: "w", kind: jobCommandDone, watched: &commandWatch{id: "cmd"}}, {uuid: "h2", kind: jobHeartbeat},
	} {
		if !q.push(j) {
			t.Fatalf("job %s not queued", j.key())
		}
	}
	if q.push(job{uuid: "h1", kind: jobHeartbeat}) {
		t.Fatal("a heartbeat already queued was queued twice")
	}
	var got []string
	for q.len() > 0 {
		j, ok := q.pop(context.Background())
		if !ok {
			t.Fatal("pop failed with jobs queued")
		}
		got = append(got, j.key())
	}
	want := []string{"hb:h1", "cmd:w:cmd", "hb:h2", "a", "takeover:b", "c"}
	if !slices.Equal(got, want) {
		t.Fatalf("jobs handed out in the order %v, want %v", got, want)
	}
}
