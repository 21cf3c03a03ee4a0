package vmlab

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCleanLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2)\r", "SeaBIOS (version 1.16.2)"},
		{"\x1b[0;1miPXE 1.0.0\x1b[0m -- Open Source", "iPXE 1.0.0 -- Open Source"},
		{"Press Ctrl-B...\b \b\b \bnet0: up", "Press Ctrl-B.net0: up"},
		{"a\tb  \r", "a b"},
		{"\x1b[", ""},
		{"\x1b", ""},
		{"\x00\x01\x7f", ""},
	} {
		if got := cleanLine(tc.in); got != tc.want {
			t.Errorf("cleanLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConsoleWaitFor(t *testing.T) {
	r, w := io.Pipe()
	c := newConsole(r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		_, _ = io.WriteString(w, "first line\r\nConfiguring (net0)...")
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "... ok\r\nANVIL-NETBOOT-OK m1\npartial")
		w.Close()
	}()
	l, err := c.WaitFor(ctx, "ANVIL-NETBOOT-OK")
	if err != nil || l.Text != "ANVIL-NETBOOT-OK m1" {
		t.Fatalf("WaitFor = %+v, %v", l, err)
	}
	cfg, ok := c.Find("Configuring")
	if !ok || cfg.Text != "Configuring (net0)...... ok" || !cfg.Start.Before(cfg.At) {
		t.Errorf("Find(Configuring) = %+v, %v: want the whole line, started before it ended", cfg, ok)
	}
	// Earlier lines are still found; the unterminated last line counts
	// once the stream ends.
	if l, err := c.WaitFor(ctx, "first"); err != nil || l.Text != "first line" {
		t.Errorf("WaitFor(first) = %+v, %v", l, err)
	}
	if l, err := c.WaitFor(ctx, "partial"); err != nil || l.Text != "partial" {
		t.Errorf("WaitFor(partial) = %+v, %v", l, err)
	}
	if _, err := c.WaitFor(ctx, "never"); !errors.Is(err, ErrConsoleClosed) {
		t.Errorf("WaitFor(never) after EOF = %v, want ErrConsoleClosed", err)
	}
	if tr := c.Transcript(time.Now(), 2); strings.Count(tr, "\n") != 2 || !strings.Contains(tr, "| partial") {
		t.Errorf("Transcript(2) = %q", tr)
	}
}

func TestConsoleWaitForTimesOut(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	c := newConsole(r)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.WaitFor(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor = %v, want DeadlineExceeded", err)
	}
}

func TestConsoleBoundsLines(t *testing.T) {
	long := strings.Repeat("x", 3*maxLineBytes+10)
	c := newConsole(strings.NewReader(long + "\n" + strings.Repeat("y\n", maxConsoleLines+5)))
	<-c.done
	lines := c.Lines()
	if len(lines) != maxConsoleLines {
		t.Fatalf("kept %d lines, want the bound %d", len(lines), maxConsoleLines)
	}
	if lines[0].Text != "y" {
		t.Errorf("oldest kept line %q: the long line's pieces should have been dropped first", lines[0].Text[:10])
	}
	if _, ok := c.Find("yy"); ok {
		t.Error("lines were joined")
	}
}

// FuzzConsole feeds arbitrary guest output: the console never panics,
// keeps lines within the bound and free of control bytes, and finds a
// marker written after the noise.
func FuzzConsole(f *testing.F) {
	f.Add([]byte("\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS\r\n"))
	f.Add([]byte("Press Ctrl-B\b \b\b \b\r\n\x1b[0;1miPXE\x1b[0m"))
	f.Add([]byte("\x1b[\x1b[\x1b"))
	f.Add([]byte(strings.Repeat("z", maxLineBytes+1)))
	f.Fuzz(func(t *testing.T, noise []byte) {
		c := newConsole(strings.NewReader(string(noise) + "\nANVIL-NETBOOT-OK fuzz\n"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.WaitFor(ctx, "ANVIL-NETBOOT-OK fuzz"); err != nil {
			t.Fatal(err)
		}
		<-c.done
		for _, l := range c.Lines() {
			if len(l.Text) > maxLineBytes || l.Text == "" {
				t.Fatalf("line of %d bytes", len(l.Text))
			}
			for _, r := range l.Text {
				if r < 0x20 || r == 0x7f {
					t.Fatalf("control byte %q in %q", r, l.Text)
				}
			}
			_ = utf8.ValidString(l.Text)
		}
	})
}
