package conductor

import (
	"context"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivermock"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// powerFenceConductor starts a conductor whose nodes' power interface is
// power, on a SQLite store, and enrolls an active node powered on with
// an agent's URL and token recorded.
func powerFenceConductor(t *testing.T, power driver.PowerInterface) (*Conductor, baremetal.Store, string) {
	t.Helper()
	ctx := context.Background()
	st, _ := sqliteAndFakeRegistry(t)
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindPower: {"mock"}}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindPower, "mock", power); err != nil {
		t.Fatal(err)
	}
	n := &baremetal.Node{Name: "fence-1", Driver: builtin.FakeHardware, PowerInterface: "mock",
		ProvisionState: statemachine.Active, PowerState: driver.PowerOn,
		DriverInternalInfo: map[string]any{driver.InternalAgentURL: "http://127.0.0.1:1", driver.InternalAgentToken: "token-of-the-running-agent"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	return launchQuiet(t, st, reg, Options{Hostname: "fence-host"}), st, n.UUID
}

// TestFencedConductorNeverTouchesTheBMC: a conductor whose reservation
// of a node was broken and taken by another conductor (it was taken for
// dead, say) still runs the operation it had begun. Its power action
// must be refused before the BMC is asked, as its writes are: it used
// to reboot the machine and only then fail to save, and the ramdisk so
// booted looked the node up, met the new owner's agent's token and was
// locked out (the chaos test's cleanings that timed out while their
// agent heartbeated).
func TestFencedConductorNeverTouchesTheBMC(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	power := drivermock.NewMockPowerInterface(ctrl) // no call expected
	c, st, uuid := powerFenceConductor(t, power)
	task, err := c.acquire(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	// Another conductor breaks the reservation and takes the node.
	if _, err := st.ReleaseReservationsOf(ctx, c.host); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReserveNode(ctx, uuid, "new-owner"); err != nil {
		t.Fatal(err)
	}
	c.resv.released(uuid)
	task.released.Store(true) // the reservation is no longer this conductor's to release
	if err := c.powerAction(ctx, task, driver.Reboot, 0); err == nil {
		t.Fatal("a fenced conductor's reboot succeeded")
	}
	got, err := st.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := got.DriverInternalInfo[driver.InternalAgentToken].(string); tok != "token-of-the-running-agent" || got.Reservation != "new-owner" {
		t.Fatalf("the new owner's node changed: token %q, reserved by %q", tok, got.Reservation)
	}
}

// TestPowerOffWipesTheAgentBeforeTheBMC: as Ironic's node_power_action,
// a power off or reboot saves the node with the agent's URL, token and
// cached steps wiped before it asks the BMC, so the ramdisk that boots
// next never meets its predecessor's token; a power on leaves them.
func TestPowerOffWipesTheAgentBeforeTheBMC(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	power := drivermock.NewMockPowerInterface(ctrl)
	var st baremetal.Store
	var uuid string
	storedAt := func(what string) func(context.Context, *driver.Task, time.Duration) error {
		return func(ctx context.Context, _ *driver.Task, _ time.Duration) error {
			n, err := st.GetNode(ctx, uuid)
			if err != nil {
				return err
			}
			if tok, ok := n.DriverInternalInfo[driver.InternalAgentToken]; ok {
				t.Errorf("%s: the stored node still has the agent token %q when the BMC is asked", what, tok)
			}
			if u, ok := n.DriverInternalInfo[driver.InternalAgentURL]; ok {
				t.Errorf("%s: the stored node still has the agent URL %q when the BMC is asked", what, u)
			}
			return nil
		}
	}
	power.EXPECT().Reboot(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(storedAt("reboot"))
	power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(driver.PowerOn, nil).AnyTimes()
	var c *Conductor
	c, st, uuid = powerFenceConductor(t, power)
	task, err := c.acquire(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	defer task.release()
	if err := c.powerAction(ctx, task, driver.Reboot, 0); err != nil {
		t.Fatal(err)
	}
}
