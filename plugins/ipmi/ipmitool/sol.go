package ipmitool

import (
	"context"
	"os"
)

// SOLReady is what "ipmitool sol activate" prints once the BMC has
// opened the serial-over-LAN payload: from then on its output is the
// machine's serial port and its input the keyboard.
const SOLReady = "[SOL Session operational"

// Invocation is one ipmitool process as plain values, for a caller that
// runs it itself (a console under a pseudo-terminal). Env holds the
// password (IPMITOOL_PASSWORD, read because of -E); Args never do.
type Invocation struct {
	Path string
	Args []string
	Env  []string
}

// SOL is what a serial-over-LAN console runs: Activate is the console
// itself ("sol activate", interactive, until killed), Deactivate drops a
// session the BMC still holds ("sol deactivate"; a BMC keeps one SOL
// session and refuses a second with "SOL payload already active on
// another session", so a stale one left by a killed process blocks every
// new console until it is dropped or times out). CipherSuite is the suite
// both use ("" for IPMI 1.5).
type SOL struct {
	Activate    Invocation
	Deactivate  Invocation
	CipherSuite string
}

// SOL returns the node's serial-over-LAN invocations with its session
// arguments. With ipmi_cipher_suite set (or IPMI 1.5) it does not contact
// the BMC; otherwise it reuses the suite this Client negotiated, or
// negotiates one with Get Device ID (suite 3, then 17), so that an
// interactive console, which cannot fall back by itself, starts with a
// suite the BMC accepts. A refused password is a CommandError of class
// FailAuth, as for every other operation.
func (c *Client) SOL(ctx context.Context) (SOL, error) {
	ciphers := c.ciphers()
	if len(ciphers) > 1 {
		if _, err := c.run(ctx, "get device id", "raw", "0x06", "0x01"); err != nil {
			return SOL{}, err
		}
		ciphers = c.ciphers()
	}
	cipher := ciphers[0]
	return SOL{
		Activate:    c.invocation(cipher, "sol", "activate"),
		Deactivate:  c.invocation(cipher, "sol", "deactivate"),
		CipherSuite: cipher,
	}, nil
}

// invocation builds one SOL process. Unlike the Client's own calls it
// passes no -v (whose diagnostics would land in the console's transcript)
// and no -R/-N, leaving ipmitool's own retries to the interactive
// session, which has no Client retry loop around it.
func (c *Client) invocation(cipher string, command ...string) Invocation {
	return Invocation{
		Path: c.path,
		Args: append(c.sessionArgs(cipher), command...),
		Env:  []string{"IPMITOOL_PASSWORD=" + c.info.Password, "PATH=" + os.Getenv("PATH")},
	}
}
