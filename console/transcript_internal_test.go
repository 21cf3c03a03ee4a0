package console

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// transcriptBytes is what the in-memory transcript holds, oldest first.
func transcriptBytes(tr *transcript) []byte {
	var b []byte
	for _, c := range tr.snapshot() {
		b = append(b, c.Data...)
	}
	return b
}

// checkBound fails unless the transcript's accounted size is within its
// limit and matches its chunks.
func checkBound(t *testing.T, tr *transcript) {
	t.Helper()
	size := 0
	for _, c := range tr.chunks {
		if len(c.Data) == 0 {
			t.Fatalf("transcript keeps an empty chunk")
		}
		size += len(c.Data) + chunkOverhead
	}
	if size != tr.size {
		t.Fatalf("transcript accounts %d bytes, its chunks cost %d", tr.size, size)
	}
	if size > tr.limit {
		t.Fatalf("transcript costs %d bytes, bound %d", size, tr.limit)
	}
}

// A large chunk followed by a small one: the transcript must keep the
// newest bytes of the large chunk, not drop all of it and be left with
// the small one. This is how TestTranscriptBounded failed under load,
// when one read of the terminal returned several lines at once.
func TestTranscriptKeepsNewestBytesOfOldestChunk(t *testing.T) {
	tr, err := newTranscript(4096, "", "n")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	var all []byte
	big := []byte(strings.Repeat("a", 3100) + "LINE 39 " + strings.Repeat("z", 900))
	tr.add(now, false, big)
	all = append(all, big...)
	checkBound(t, tr)
	small := []byte("zzzz\r\r\nmachine> ")
	tr.add(now, false, small)
	all = append(all, small...)
	checkBound(t, tr)
	got := transcriptBytes(tr)
	if !bytes.HasSuffix(all, got) {
		t.Fatalf("transcript is not the newest bytes of the output")
	}
	if want := tr.limit - 2*chunkOverhead; len(got) != want {
		t.Fatalf("transcript holds %d bytes, want %d (the bound less two chunks' overhead)", len(got), want)
	}
	if !bytes.Contains(got, []byte("LINE 39")) {
		t.Fatalf("transcript lost the newest output: %q", got)
	}
}

// Whatever the chunk sizes, the transcript is the newest bytes of what
// was recorded, as many as the bound allows, and never over the bound.
func TestTranscriptBoundAnySizes(t *testing.T) {
	for _, limit := range []int{1, chunkOverhead, chunkOverhead + 1, 200, 4096} {
		tr, err := newTranscript(limit, "", "n")
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		now := time.Unix(0, 0)
		for i := range 300 {
			n := (i*7919)%(2*limit+3) + 1
			data := bytes.Repeat([]byte{byte('a' + i%26)}, n)
			tr.add(now, i%3 == 0, data)
			all = append(all, data...)
			got := transcriptBytes(tr)
			if !bytes.HasSuffix(all, got) {
				t.Fatalf("limit %d, chunk %d: transcript is not the newest bytes recorded", limit, i)
			}
			if len(got) == 0 {
				t.Fatalf("limit %d, chunk %d: transcript is empty", limit, i)
			}
			if limit <= chunkOverhead+1 {
				// Too small for a chunk and its overhead: the newest
				// byte alone.
				if len(tr.chunks) != 1 || len(got) != 1 {
					t.Fatalf("limit %d, chunk %d: transcript holds %d chunks, %d bytes, want the newest byte alone", limit, i, len(tr.chunks), len(got))
				}
			} else {
				checkBound(t, tr)
				// The oldest chunk is cut, not dropped, so the bound is
				// filled, but for a dropped chunk's overhead, unless
				// everything recorded fits.
				cost := len(got) + len(tr.chunks)*chunkOverhead
				if cost < limit-chunkOverhead && len(got) < len(all) {
					t.Fatalf("limit %d, chunk %d: transcript costs %d, holds %d of %d bytes", limit, i, cost, len(got), len(all))
				}
			}
		}
	}
}
