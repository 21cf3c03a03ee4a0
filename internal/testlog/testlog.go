// Package testlog holds what tests use to capture logs.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a log sink that a logger (or a process's output) and a test
// use at once: Write and String are safe from any goroutine. The zero
// value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
