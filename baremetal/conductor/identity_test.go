package conductor_test

import (
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestMachineIdentityClearedOnDeliberateChange checks the conductor's
// side of the wrong-machine protection (driver.IdentityKey): a node update
// that leaves driver_info and the hardware type alone keeps the recorded
// identity, one that changes driver_info forgets it, an inspection starts
// without it (so the driver records it afresh) and a failed inspection
// puts the old record back.
func TestMachineIdentityClearedOnDeliberateChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{})
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: "ident", Driver: builtin.FakeHardware, DriverInfo: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	identity := func() any {
		m, err := h.store.GetNode(h.ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		return m.DriverInternalInfo[driver.IdentityKey]
	}
	update := func(change func(*baremetal.Node)) {
		t.Helper()
		if _, err := h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
			if n.DriverInternalInfo == nil {
				n.DriverInternalInfo = map[string]any{}
			}
			change(n)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(n *baremetal.Node) { n.DriverInternalInfo[driver.IdentityKey] = "fake:1"; n.Description = "x" })
	if got := identity(); got != "fake:1" {
		t.Fatalf("an update that leaves driver_info alone dropped the identity: %v", got)
	}
	update(func(n *baremetal.Node) { n.DriverInfo[fake.FailKey] = "inspect.inspect_hardware" })
	if got := identity(); got != nil {
		t.Fatalf("a driver_info update kept the identity %v", got)
	}

	// A failed inspection keeps the record it found.
	update(func(n *baremetal.Node) { n.DriverInternalInfo[driver.IdentityKey] = "fake:2" })
	if err := h.c.Inspect(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m := h.waitFor(n.UUID, statemachine.InspectFailed)
	if got := m.DriverInternalInfo[driver.IdentityKey]; got != "fake:2" || m.LastError == "" {
		t.Fatalf("failed inspection: identity %v, last error %q", got, m.LastError)
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	// A successful one starts without it (the fake driver records none).
	update(func(n *baremetal.Node) { delete(n.DriverInfo, fake.FailKey) })
	update(func(n *baremetal.Node) { n.DriverInternalInfo[driver.IdentityKey] = "fake:3" })
	if err := h.c.Inspect(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	if got := identity(); got != nil {
		t.Fatalf("inspection kept the old identity %v instead of recording it afresh", got)
	}
}
