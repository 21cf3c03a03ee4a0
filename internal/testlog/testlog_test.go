package testlog

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent writes from several goroutines while reading; run
// with -race it proves the buffer is safe, and every write is kept whole.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 400 {
		t.Errorf("%d lines kept, want 400", got)
	}
}
