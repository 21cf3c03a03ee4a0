//go:build linux

package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"google.golang.org/grpc/credentials"
)

// kernelAuthenticated says that on this platform the host and its plugins
// authenticate each other by the kernel's peer credentials on their Unix
// socket instead of go-plugin's AutoMTLS (see the package documentation,
// "Transport security").
const kernelAuthenticated = true

// peerCreds are gRPC transport credentials for a Unix socket between a
// host and its plugin: the handshake reads the peer's credentials from
// the kernel (SO_PEERCRED) and accepts only the expected process running
// as the same user. The traffic itself is not encrypted: nobody but that
// user and root can reach or observe a Unix socket in the host's private
// directory, and both can read the processes' memory anyway.
type peerCreds struct {
	// peerPID returns the process the other end must be: the plugin
	// child on the host side, the parent (the host) on the plugin side.
	peerPID func() int
	side    string // "plugin" or "host", for errors
}

// hostCreds accepts only the plugin process pid returns.
func hostCreds(pid func() int) credentials.TransportCredentials {
	return &peerCreds{peerPID: pid, side: "plugin"}
}

// pluginCreds accepts only the plugin's parent, the host that started it.
func pluginCreds() credentials.TransportCredentials {
	return &peerCreds{peerPID: os.Getppid, side: "host"}
}

// peerAuthInfo is what a handshake learned about the peer.
type peerAuthInfo struct {
	credentials.CommonAuthInfo
	PID int32
	UID uint32
}

func (peerAuthInfo) AuthType() string { return "unix-peercred" }

func (c *peerCreds) check(conn net.Conn) (credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("plugin transport: %T is not a Unix socket; the %s cannot be authenticated", conn, c.side)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("plugin transport: reading the %s's peer credentials: %w", c.side, credErr)
	}
	want := c.peerPID()
	if int(cred.Pid) != want || int(cred.Uid) != os.Getuid() {
		return nil, fmt.Errorf("plugin transport: %w: the peer is process %d of user %d, want the %s, process %d of user %d",
			errPeerRefused, cred.Pid, cred.Uid, c.side, want, os.Getuid())
	}
	return peerAuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, PID: cred.Pid, UID: cred.Uid}, nil
}

// errPeerRefused is the handshake's error for an unexpected peer.
var errPeerRefused = errors.New("peer refused")

func (c *peerCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	info, err := c.check(conn)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, info, nil
}

func (c *peerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	info, err := c.check(conn)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, info, nil
}

func (c *peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "unix-peercred"}
}

func (c *peerCreds) Clone() credentials.TransportCredentials { cc := *c; return &cc }

// OverrideServerName is deprecated in gRPC and means nothing here.
func (c *peerCreds) OverrideServerName(string) error { return nil }
