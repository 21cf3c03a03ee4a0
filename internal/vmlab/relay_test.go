package vmlab

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConsoleRelay plays two boots of a machine against its relay, as
// QEMU's console chardev does: each connects to the socket and closes
// it when QEMU exits; their bytes reach the Console, the log file and
// the tee in order, what is typed reaches the running boot, and stop
// ends the transcript.
func TestConsoleRelay(t *testing.T) {
	dir, err := os.MkdirTemp("", "relay-") // short: a socket path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var mu sync.Mutex
	var teed strings.Builder
	r, err := newConsoleRelay(dir, func(b []byte) {
		mu.Lock()
		teed.Write(b)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go r.serve(&wg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	boot := func(text string) net.Conn {
		t.Helper()
		c, err := net.Dial("unix", r.addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := boot("SeaBIOS\nboot one\n")
	if _, err := r.console.WaitFor(ctx, "boot one"); err != nil {
		t.Fatal(err)
	}
	first.Close() // QEMU exits
	second := boot("boot two\n")
	if _, err := r.console.WaitFor(ctx, "boot two"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.current().Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Read(got); err != nil || string(got) != "typed\n" {
		t.Errorf("the running boot read %q, %v", got, err)
	}
	r.stop(&wg)
	const want = "SeaBIOS\nboot one\nboot two\n"
	if b, _ := os.ReadFile(r.logPath); string(b) != want {
		t.Errorf("log file %q, want %q", b, want)
	}
	mu.Lock()
	if teed.String() != want {
		t.Errorf("tee got %q, want %q", teed.String(), want)
	}
	mu.Unlock()
	if _, err := r.console.WaitFor(ctx, "never"); err == nil {
		t.Error("the console's transcript did not end at stop")
	}
	if _, err := second.Read(got); err == nil {
		t.Error("the running boot's connection is still open after stop")
	}
}
