package conductor_test

import (
	"context"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// cdBoot stands in for a virtual-media boot interface on the fake BMC: it
// prepares the ramdisk as the fake boot does, then sets a one-time boot
// from CD in the record the fake management keeps, as
// redfish-virtual-media's InsertMedia and PATCH Cd do on a real BMC.
type cdBoot struct{ *fake.Boot }

func (b cdBoot) PrepareRamdisk(ctx context.Context, t *driver.Task, params map[string]any) error {
	if err := b.Boot.PrepareRamdisk(ctx, t, params); err != nil {
		return err
	}
	t.SetDriverInternalInfo(fake.BootDeviceKey, string(driver.BootCDROM))
	t.SetDriverInternalInfo(fake.BootPersistentKey, false)
	return nil
}

// TestRamdiskBootKeepsBootInterfaceDevice deploys a node whose boot
// interface boots the ramdisk from virtual CD: once the node waits for its
// agent, the fake management must still record the CD the boot interface
// chose. The conductor used to set PXE after PrepareRamdisk (on
// sushy-tools: InsertMedia, PATCH Cd, PATCH Pxe, Reset), so a real server
// network-booted instead of booting the virtual CD.
func TestRamdiskBootKeepsBootInterfaceDevice(t *testing.T) {
	t.Parallel()
	const cdName = "cd-test"
	for _, tc := range []struct {
		boot string
		want driver.BootDevice
	}{
		{cdName, driver.BootCDROM},
		{fake.Name, driver.BootPXE},
	} {
		t.Run(tc.boot, func(t *testing.T) {
			client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			reg := driver.NewRegistry(driver.Config{
				EnabledHardwareTypes: []string{builtin.FakeHardware},
				EnabledInterfaces: map[driver.Kind][]string{
					driver.KindBoot:   {fake.Name, cdName},
					driver.KindDeploy: {agentdeploy.Name, fake.Name},
				},
			})
			if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
				t.Fatal(err)
			}
			if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
				t.Fatal(err)
			}
			if err := reg.RegisterInterface(driver.KindBoot, cdName, cdBoot{fake.NewBoot(fake.Config{})}); err != nil {
				t.Fatal(err)
			}
			store := openStore(t, false)
			c, err := conductor.New(store, reg, conductor.Options{Agent: conductor.AgentSettings{Client: client, APIURL: "http://127.0.0.1:1"}, Hostname: "bootdev-conductor", Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Launch(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				c.Stop(sctx)
			})
			h := &harness{t: t, store: store, c: c, ctx: ctx}
			n, err := c.Enroll(ctx, &baremetal.Node{Name: uniqueName("bootdev"), Driver: builtin.FakeHardware,
				BootInterface: tc.boot, DeployInterface: agentdeploy.Name,
				InstanceInfo: map[string]any{"image_source": "http://127.0.0.1:1/disk.img", "image_checksum": "0123456789abcdef0123456789abcdef"}})
			h.must(err)
			h.must(c.Manage(ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Manageable)
			// Available without cleaning's ramdisk boot: the deploy is the
			// first ramdisk boot the node sees.
			cur, err := store.GetNode(ctx, n.UUID)
			h.must(err)
			cur.AutomatedClean = new(false)
			h.must(store.UpdateNode(ctx, cur, ""))
			h.must(c.Provide(ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Available)
			h.must(c.Deploy(ctx, n.UUID, conductor.DeployOptions{}))
			w := h.waitFor(n.UUID, statemachine.DeployWait)
			if got, _ := w.DriverInternalInfo[fake.BootDeviceKey].(string); got != string(tc.want) {
				t.Fatalf("boot device after the ramdisk boot = %q, want %q (the boot interface's choice)", got, tc.want)
			}
			if got, _ := w.DriverInternalInfo[fake.BootPreparedKey].(string); got != "ramdisk" {
				t.Fatalf("boot prepared = %q, want ramdisk", got)
			}
			if got, _ := w.DriverInternalInfo[fake.PowerStateKey].(string); got != string(driver.PowerOn) {
				t.Fatalf("power = %q, want power on (booting the ramdisk)", got)
			}
		})
	}
}
