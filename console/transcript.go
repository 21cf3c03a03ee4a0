package console

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// chunkOverhead is what a chunk costs beyond its bytes, counted against
// TranscriptBytes so that a flood of one-byte keystrokes is bounded too.
const chunkOverhead = 64

// transcript is one session's record: a ring of chunks bounded by
// size, oldest dropped first, and optionally an append-only file.
type transcript struct {
	mu     sync.Mutex
	limit  int
	size   int
	chunks []Chunk
	file   *os.File
	path   string
	err    error // the first write error of the file; later chunks skip it
}

func newTranscript(limit int, dir, node string) (*transcript, error) {
	t := &transcript{limit: limit}
	if dir == "" {
		return t, nil
	}
	if filepath.Base(node) != node || node == "." || node == ".." {
		return nil, &SpecError{NodeUUID: node, Field: "Spec.NodeUUID", Want: "a name usable as a file name in Options.TranscriptDir"}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("transcript directory: %w", err)
	}
	t.path = filepath.Join(dir, node+".log")
	f, err := os.OpenFile(t.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("transcript file: %w", err)
	}
	// An existing file keeps its mode on open; a transcript holds what
	// the machine printed, so only this user may read it.
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("transcript file: %w", err)
	}
	t.file = f
	return t, nil
}

// add records a chunk. data is copied. The transcript keeps the newest
// bytes: whole chunks go oldest first, and the oldest chunk left is cut
// at its start, so that the newest output fills the bound whatever the
// sizes of the reads that brought it.
func (t *transcript) add(at time.Time, input bool, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A chunk alone never costs more than the bound (one byte at least,
	// whatever the bound).
	if keep := max(t.limit-chunkOverhead, 1); len(data) > keep {
		data = data[len(data)-keep:]
	}
	c := Chunk{At: at, Input: input, Data: append([]byte(nil), data...)}
	t.chunks = append(t.chunks, c)
	t.size += len(c.Data) + chunkOverhead
	drop := 0
	for t.size > t.limit && drop < len(t.chunks)-1 {
		old := &t.chunks[drop]
		if excess := t.size - t.limit; excess < len(old.Data) {
			// Cutting the oldest chunk's start is enough: it keeps its
			// newest bytes, copied so the cut ones are freed.
			old.Data = append([]byte(nil), old.Data[excess:]...)
			t.size -= excess
			break
		}
		t.size -= len(old.Data) + chunkOverhead
		*old = Chunk{}
		drop++
	}
	t.chunks = t.chunks[drop:]
	if t.file != nil && t.err == nil {
		_, t.err = t.file.Write(formatChunk(c))
	}
}

// formatChunk is one line of the transcript file: the time, "out" or
// "in", and the bytes quoted, so that control sequences are visible and
// reading the file with cat cannot drive the reader's terminal.
func formatChunk(c Chunk) []byte {
	dir := "out"
	if c.Input {
		dir = "in"
	}
	line := c.At.UTC().Format(time.RFC3339Nano) + " " + dir + " " + strconv.Quote(string(c.Data)) + "\n"
	return []byte(line)
}

func (t *transcript) snapshot() []Chunk {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Chunk, len(t.chunks))
	for i, c := range t.chunks {
		out[i] = Chunk{At: c.At, Input: c.Input, Data: append([]byte(nil), c.Data...)}
	}
	return out
}

// close closes the file and returns its first write or close error; the
// chunks stay readable.
func (t *transcript) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file == nil {
		return nil
	}
	if err := t.file.Close(); err != nil && t.err == nil {
		t.err = err
	}
	t.file = nil
	if t.err != nil {
		return fmt.Errorf("%s: %w", t.path, t.err)
	}
	return nil
}
