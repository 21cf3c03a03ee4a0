package vmlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Bounds on what a console keeps: a guest prints what it likes.
const (
	maxLineBytes    = 4096
	maxConsoleLines = 20000
)

// Line is one line of a serial console, cleaned of terminal control
// sequences.
type Line struct {
	// Start is when its first byte was read, At when its end was: iPXE
	// prints "Configuring (net0 ...)" when DHCP starts and "ok" on the
	// same line when it is done.
	Start, At time.Time
	Text      string
}

// Console reads a VM's serial console line by line and keeps what it read
// (bounded) for WaitFor and for failure messages.
type Console struct {
	mu      sync.Mutex
	lines   []Line
	dropped int           // lines dropped from the front at the bound
	changed chan struct{} // closed and replaced on each new line and at the end
	ended   bool
	err     error // why reading ended (io.EOF when QEMU closed it)
	done    chan struct{}
}

// newConsole starts reading r until EOF or an error; r is closed by its
// owner (the VM).
func newConsole(r io.Reader) *Console {
	c := &Console{changed: make(chan struct{}), done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *Console) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, maxLineBytes)
	var (
		cur   []byte
		start time.Time
	)
	for {
		b, err := br.ReadByte()
		if err != nil {
			if len(cur) > 0 {
				c.add(start, string(cur))
			}
			c.end(err)
			return
		}
		if len(cur) == 0 {
			start = time.Now()
		}
		switch {
		case b == '\n':
			c.add(start, string(cur))
			cur = cur[:0]
		case len(cur) >= maxLineBytes:
			c.add(start, string(cur))
			cur = append(cur[:0], b)
			start = time.Now()
		default:
			cur = append(cur, b)
		}
	}
}

func (c *Console) add(start time.Time, raw string) {
	text := cleanLine(raw)
	if text == "" {
		return
	}
	c.mu.Lock()
	c.lines = append(c.lines, Line{Start: start, At: time.Now(), Text: text})
	if len(c.lines) > maxConsoleLines {
		n := len(c.lines) - maxConsoleLines
		c.lines = append(c.lines[:0:0], c.lines[n:]...)
		c.dropped += n
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Console) end(err error) {
	c.mu.Lock()
	c.ended, c.err = true, err
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// ErrConsoleClosed is returned by WaitFor when the console ended (the VM
// exited) before a matching line.
var ErrConsoleClosed = errors.New("vmlab: console closed")

// WaitFor returns the first line (since the VM started) that contains
// substr, waiting for it until ctx ends or the console closes.
func (c *Console) WaitFor(ctx context.Context, substr string) (Line, error) {
	return c.wait(ctx, substr, func(s string) bool { return strings.Contains(s, substr) })
}

// WaitForAny returns the first line that contains any of substrs, and the
// index of the substring it contains.
func (c *Console) WaitForAny(ctx context.Context, substrs ...string) (Line, int, error) {
	l, err := c.wait(ctx, strings.Join(substrs, " | "), func(s string) bool {
		for _, sub := range substrs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return l, -1, err
	}
	for i, sub := range substrs {
		if strings.Contains(l.Text, sub) {
			return l, i, nil
		}
	}
	return l, -1, nil // not reached: the line matched one of them
}

// WaitForRegexp is WaitFor with a regular expression.
func (c *Console) WaitForRegexp(ctx context.Context, re *regexp.Regexp) (Line, error) {
	return c.wait(ctx, re.String(), re.MatchString)
}

// WaitForAfter is WaitFor for the lines read at or after since: a later
// boot of a machine whose console outlives its boots (BMCMachine).
func (c *Console) WaitForAfter(ctx context.Context, since time.Time, substr string) (Line, error) {
	return c.waitLine(ctx, substr, func(l Line) bool { return !l.At.Before(since) && strings.Contains(l.Text, substr) })
}

func (c *Console) wait(ctx context.Context, what string, match func(string) bool) (Line, error) {
	return c.waitLine(ctx, what, func(l Line) bool { return match(l.Text) })
}

func (c *Console) waitLine(ctx context.Context, what string, match func(Line) bool) (Line, error) {
	seen := 0
	for {
		c.mu.Lock()
		for i := max(seen-c.dropped, 0); i < len(c.lines); i++ {
			if match(c.lines[i]) {
				l := c.lines[i]
				c.mu.Unlock()
				return l, nil
			}
		}
		seen = c.dropped + len(c.lines)
		ended, err, changed := c.ended, c.err, c.changed
		c.mu.Unlock()
		if ended {
			return Line{}, fmt.Errorf("%w before a line matching %q (%v)", ErrConsoleClosed, what, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Line{}, fmt.Errorf("vmlab: no console line matching %q: %w", what, ctx.Err())
		}
	}
}

// Find returns the first line so far that contains substr, without
// waiting.
func (c *Console) Find(substr string) (Line, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if strings.Contains(l.Text, substr) {
			return l, true
		}
	}
	return Line{}, false
}

// Lines returns a copy of the lines kept so far.
func (c *Console) Lines() []Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Line(nil), c.lines...)
}

// Transcript returns the last n lines kept, one per line, each with its
// time since start: for failure messages.
func (c *Console) Transcript(start time.Time, n int) string {
	lines := c.Lines()
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%7.2fs | %s\n", l.At.Sub(start).Seconds(), l.Text)
	}
	return b.String()
}

// cleanLine removes what a terminal would interpret rather than show: ANSI
// escape sequences (SeaBIOS and iPXE colour and clear the screen),
// carriage returns, backspaces (iPXE's spinner) and other control bytes.
func cleanLine(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == 0x1b:
			i = skipEscape(s, i)
		case b == '\b':
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case b == '\t':
			out = append(out, ' ')
		case b < 0x20 || b == 0x7f:
			// dropped: \r and the rest
		default:
			out = append(out, b)
		}
	}
	return strings.TrimRight(string(out), " ")
}

// skipEscape returns the index of the last byte of the escape sequence
// starting at s[i] (an ESC).
func skipEscape(s string, i int) int {
	if i+1 >= len(s) {
		return i
	}
	if s[i+1] != '[' {
		return i + 1 // a two-byte sequence such as ESC c
	}
	for j := i + 2; j < len(s); j++ {
		if s[j] >= 0x40 && s[j] <= 0x7e {
			return j
		}
	}
	return len(s) - 1
}
