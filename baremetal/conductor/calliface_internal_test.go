package conductor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestVerbsLackingInterfaceAreUnsupported runs each operation that needs
// one driver interface on a node whose driver has none: each must fail
// with a *driver.UnsupportedError naming the node, the missing kind and
// the operation (matched by errors.Is with driver.ErrUnsupported), where
// eleven of them used to return an untyped "no ... interface" error.
func TestVerbsLackingInterfaceAreUnsupported(t *testing.T) {
	ctx := context.Background()
	store, reg := sqliteAndFakeRegistry(t)
	c, err := New(store, reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := driver.NewDriver("bare", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		state statemachine.State
		kind  driver.Kind
		op    string
		run   func(*task) error
	}{
		{"verify", statemachine.Verifying, driver.KindPower, "verify", func(tk *task) error { return c.doVerify(ctx, tk) }},
		{"inspect", statemachine.Inspecting, driver.KindInspect, "inspect", func(tk *task) error { return c.doInspect(ctx, tk) }},
		{"tear down", statemachine.Deleting, driver.KindDeploy, "tear down", func(tk *task) error { return c.doTearDown(ctx, tk) }},
		{"adopt", statemachine.Adopting, driver.KindDeploy, "adopt", func(tk *task) error { return c.doAdopt(ctx, tk) }},
		{"rescue", statemachine.Rescuing, driver.KindRescue, "rescue", func(tk *task) error { return c.doRescue(ctx, tk) }},
		{"unrescue", statemachine.Unrescuing, driver.KindRescue, "unrescue", func(tk *task) error { return c.doUnrescue(ctx, tk) }},
		{"power", statemachine.Active, driver.KindPower, "change the power state", func(tk *task) error {
			return c.powerAction(ctx, tk, driver.PowerOn, time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &baremetal.Node{Name: "bare-" + strings.ReplaceAll(tc.name, " ", "-"), Driver: builtin.FakeHardware, ProvisionState: tc.state}
			if err := store.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			tk := c.newTask(n)
			tk.drv = bare
			err := tc.run(tk)
			var ue *driver.UnsupportedError
			if !errors.Is(err, driver.ErrUnsupported) || !errors.As(err, &ue) {
				t.Fatalf("error %v (%T), want a *driver.UnsupportedError", err, err)
			}
			if ue.Node != n.UUID || ue.Kind != tc.kind || ue.Operation != tc.op || ue.Impl != "" {
				t.Errorf("error names node %q kind %q op %q impl %q, want %q %q %q and no implementation", ue.Node, ue.Kind, ue.Operation, ue.Impl, n.UUID, tc.kind, tc.op)
			}
		})
	}
}
