package ipmitool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// SOL negotiates the cipher suite when none is configured (the BMC here
// offers only 17), keeps the password out of the arguments, and builds
// both invocations with the node's session options.
func TestSOLInvocations(t *testing.T) {
	f := newFakeBMC(t)
	f.suites = []string{"17"}
	c, err := New(Info{Address: "10.0.0.9", Port: 6230, Username: "admin", Password: f.password, PrivLevel: "OPERATOR", ProtocolVersion: "2.0"}, f.opts())
	if err != nil {
		t.Fatal(err)
	}
	sol, err := c.SOL(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sol.CipherSuite != "17" || f.attempts != 2 || !slices.Equal(f.ran(), []string{"raw 0x06 0x01"}) {
		t.Fatalf("suite %q after %d attempts running %q, want 17 negotiated with Get Device ID", sol.CipherSuite, f.attempts, f.ran())
	}
	wantArgs := []string{"-I", "lanplus", "-H", "10.0.0.9", "-L", "OPERATOR", "-p", "6230", "-U", "admin", "-E", "-C", "17"}
	if !slices.Equal(sol.Activate.Args, append(slices.Clone(wantArgs), "sol", "activate")) ||
		!slices.Equal(sol.Deactivate.Args, append(slices.Clone(wantArgs), "sol", "deactivate")) {
		t.Fatalf("activate %q, deactivate %q", sol.Activate.Args, sol.Deactivate.Args)
	}
	for _, inv := range []Invocation{sol.Activate, sol.Deactivate} {
		if strings.Contains(strings.Join(inv.Args, " "), f.password) || !slices.Contains(inv.Env, "IPMITOOL_PASSWORD="+f.password) || inv.Path == "" {
			t.Fatalf("invocation %+v: want the password in Env only", inv)
		}
	}
	// A second call reuses the negotiated suite without a BMC round trip.
	if again, err := c.SOL(context.Background()); err != nil || again.CipherSuite != "17" || f.attempts != 2 {
		t.Fatalf("second SOL: %q, %d attempts, %v", again.CipherSuite, f.attempts, err)
	}
}

// A configured suite, or IPMI 1.5, needs no BMC contact; a refused
// password during negotiation is a FailAuth CommandError.
func TestSOLConfiguredAndRefused(t *testing.T) {
	f := newFakeBMC(t)
	for _, info := range []Info{
		{Address: "bmc", Password: "x", PrivLevel: "ADMINISTRATOR", ProtocolVersion: "2.0", CipherSuite: "3"},
		{Address: "bmc", Password: "x", PrivLevel: "ADMINISTRATOR", ProtocolVersion: "1.5"},
	} {
		c, err := New(info, f.opts())
		if err != nil {
			t.Fatal(err)
		}
		sol, err := c.SOL(context.Background())
		if err != nil || f.attempts != 0 {
			t.Fatalf("%v: %v after %d attempts", info, err, f.attempts)
		}
		if info.ProtocolVersion == "1.5" && (sol.CipherSuite != "" || slices.Contains(sol.Activate.Args, "-C") || sol.Activate.Args[1] != "lan") {
			t.Fatalf("IPMI 1.5: %q", sol.Activate.Args)
		}
		if info.CipherSuite == "3" && !slices.Contains(sol.Activate.Args, "3") {
			t.Fatalf("suite 3: %q", sol.Activate.Args)
		}
	}
	c, err := New(Info{Address: "bmc", Username: "admin", Password: "wrong", PrivLevel: "ADMINISTRATOR", ProtocolVersion: "2.0"}, f.opts())
	if err != nil {
		t.Fatal(err)
	}
	var ce *CommandError
	if _, err := c.SOL(context.Background()); !errors.As(err, &ce) || ce.Class != FailAuth || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("want a FailAuth CommandError without the password, got %v", err)
	}
}
