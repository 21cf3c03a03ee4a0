package rfdriver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// TestManagementVirtualMedia drives driver.VirtualMediaManager of the
// redfish management against the mockup's CD1, CD2 and Floppy1 (which
// also takes USB sticks): attach replaces the first matching device's
// image, detach ejects by type, or everything.
func TestManagementVirtualMedia(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	vm, ok := driver.As[driver.VirtualMediaManager](d.Management())
	if !ok {
		t.Fatal("the redfish management is no VirtualMediaManager")
	}
	state := func() string {
		t.Helper()
		list, err := vm.VirtualMedia(ctx, tk)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, m := range list {
			img := "-"
			if m.Inserted {
				img = m.Image
			}
			out += fmt.Sprintf("%v=%s ", m.MediaTypes, img)
		}
		return out
	}
	const iso, img = "http://192.0.2.5/a.iso", "http://192.0.2.5/b.img"
	if err := vm.DetachVirtualMedia(ctx, tk, nil); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"all ejected", func() error { return nil }, "[CD DVD]=- [CD DVD]=- [Floppy USBStick]=- "},
		{"attach cdrom", func() error { return vm.AttachVirtualMedia(ctx, tk, driver.VirtualMediaCDROM, iso) },
			"[CD DVD]=" + iso + " [CD DVD]=- [Floppy USBStick]=- "},
		{"attach disk", func() error { return vm.AttachVirtualMedia(ctx, tk, driver.VirtualMediaDisk, img) },
			"[CD DVD]=" + iso + " [CD DVD]=- [Floppy USBStick]=" + img + " "},
		{"replace cdrom", func() error { return vm.AttachVirtualMedia(ctx, tk, driver.VirtualMediaCDROM, img) },
			"[CD DVD]=" + img + " [CD DVD]=- [Floppy USBStick]=" + img + " "},
		{"detach cdrom", func() error {
			return vm.DetachVirtualMedia(ctx, tk, []driver.VirtualMediaDevice{driver.VirtualMediaCDROM})
		},
			"[CD DVD]=- [CD DVD]=- [Floppy USBStick]=" + img + " "},
		{"detach floppy", func() error {
			return vm.DetachVirtualMedia(ctx, tk, []driver.VirtualMediaDevice{driver.VirtualMediaFloppy})
		},
			"[CD DVD]=- [CD DVD]=- [Floppy USBStick]=- "},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := state(); got != st.want {
			t.Errorf("%s: devices %s, want %s", st.name, got, st.want)
		}
	}
	if err := vm.AttachVirtualMedia(ctx, tk, "tape", iso); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("unknown device: %v", err)
	}
	if err := vm.DetachVirtualMedia(ctx, tk, []driver.VirtualMediaDevice{"tape"}); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("unknown device: %v", err)
	}
}
