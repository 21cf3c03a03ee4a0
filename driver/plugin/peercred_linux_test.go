//go:build linux

package plugin

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestPeerCredentialsAcceptOnlyTheExpectedProcess connects to a Unix
// socket this process listens on, so the kernel reports this process as
// the peer of both ends: credentials expecting it accept the connection,
// credentials expecting another process (a stranger's socket, or a
// stranger connecting to a plugin) refuse it.
func TestPeerCredentialsAcceptOnlyTheExpectedProcess(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() (net.Conn, net.Conn) {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c, <-accepted
	}

	c, s := dial()
	if _, info, err := hostCreds(os.Getpid).ClientHandshake(t.Context(), "", c); err != nil || info.AuthType() != "unix-peercred" {
		t.Errorf("host side, expected peer: %v, %v", info, err)
	}
	if _, _, err := (&peerCreds{peerPID: os.Getpid, side: "host"}).ServerHandshake(s); err != nil {
		t.Errorf("plugin side, expected peer: %v", err)
	}
	c.Close()
	s.Close()

	c, s = dial()
	if _, _, err := hostCreds(func() int { return os.Getpid() + 1 }).ClientHandshake(t.Context(), "", c); !errors.Is(err, errPeerRefused) {
		t.Errorf("host side, a stranger's socket: %v, want %v", err, errPeerRefused)
	}
	// The test process is not its own parent: the plugin side refuses it.
	if _, _, err := pluginCreds().ServerHandshake(s); !errors.Is(err, errPeerRefused) {
		t.Errorf("plugin side, a stranger connecting: %v, want %v", err, errPeerRefused)
	}

	a, b := net.Pipe()
	defer b.Close()
	if _, _, err := hostCreds(os.Getpid).ClientHandshake(t.Context(), "", a); err == nil {
		t.Error("a connection that is not a Unix socket was accepted")
	}
}
