package pxe_test

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/statemachine"
)

// The ipxe boot interface writes the node's ramdisk boot configuration
// into the boot server's store and sets a one-time network boot.
func Example() {
	store := netboottest.NewStore() // the boot server's netboot.ConfigStore
	boot := pxe.New(store, pxe.Options{
		DeployKernel:  "http://192.0.2.1:8080/ipa.kernel",
		DeployRamdisk: "http://192.0.2.1:8080/ipa.initramfs",
	}).IPXE()

	task := &driver.Task{NodeUUID: "n1", ProvisionState: statemachine.Cleaning,
		Ports: []driver.Port{{Address: "52:54:00:12:34:56", PXEEnabled: true}}}
	mgmt := &recordingManagement{}
	bind(task, boot.Name(), boot, mgmt) // the conductor binds the node's driver

	ctx := context.Background()
	if err := boot.Validate(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	if err := boot.PrepareRamdisk(ctx, task, map[string]any{"ipa-api-url": "http://192.0.2.1:6385"}); err != nil {
		fmt.Println(err)
		return
	}
	c, _ := store.Config("n1")
	dev, _ := mgmt.last()
	fmt.Println(c.Interface, c.Mode, c.Action, c.Purpose, c.MACs)
	fmt.Println(c.Params)
	fmt.Println("boot device:", dev.Device, "persistent:", dev.Persistent)
	// Output:
	// ipxe uefi ramdisk clean [52:54:00:12:34:56]
	// [nofb nomodeset vga=normal ipa-api-url=http://192.0.2.1:6385]
	// boot device: pxe persistent: false
}
