package faultlab

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line, on 127.0.0.1.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestProxyCutAndRestore(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "before"); err != nil || got != "before\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}
	p.Cut()
	if !p.IsCut() {
		t.Fatal("IsCut is false after Cut")
	}
	// The cut pair stops counting at once, not when its goroutines
	// notice the closed sockets (under load they notice late).
	if n := p.Conns(); n != 0 {
		t.Fatalf("Conns = %d right after Cut, want 0", n)
	}
	if _, err := roundTrip(c, "during"); err == nil {
		t.Fatal("an established connection still works after Cut")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if _, err := roundTrip(c2, "new"); err == nil {
			t.Fatal("a new connection works during the cut")
		}
		c2.Close()
	}
	if d := p.Restore(); d <= 0 {
		t.Fatalf("Restore returned %v, want the cut's length", d)
	}
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "after"); err != nil || got != "after\n" {
		t.Fatalf("after the restore: %q, %v", got, err)
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns = %d, want 1", n)
	}
}

func TestRewriteDSN(t *testing.T) {
	got, err := RewriteDSN("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "127.0.0.1:4000")
	if err != nil || got != "postgres://postgres@127.0.0.1:4000/test?sslmode=disable" {
		t.Fatalf("RewriteDSN = %q, %v", got, err)
	}
	if _, err := RewriteDSN("host=x", "127.0.0.1:1"); err == nil {
		t.Fatal("RewriteDSN accepted a key=value DSN")
	}
	up, err := Upstream("postgres://postgres@localhost/test")
	if err != nil || up != "localhost:5432" {
		t.Fatalf("Upstream = %q, %v", up, err)
	}
}
