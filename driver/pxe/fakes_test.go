package pxe_test

import (
	"context"
	"slices"
	"sync"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/noop"
)

// bootDeviceCall is one SetBootDevice a recordingManagement received.
type bootDeviceCall struct {
	Device     driver.BootDevice
	Persistent bool
}

// recordingManagement is a management interface that records the boot
// devices set and supports the devices it is given.
type recordingManagement struct {
	noop.Management
	supported []driver.BootDevice
	mu        sync.Mutex
	calls     []bootDeviceCall
}

func (m *recordingManagement) SupportedBootDevices(ctx context.Context, _ *driver.Task) ([]driver.BootDevice, error) {
	return slices.Clone(m.supported), nil
}

func (m *recordingManagement) SetBootDevice(ctx context.Context, _ *driver.Task, d driver.BootDevice, persistent bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, bootDeviceCall{d, persistent})
	return nil
}

func (m *recordingManagement) last() (bootDeviceCall, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.calls) == 0 {
		return bootDeviceCall{}, 0
	}
	return m.calls[len(m.calls)-1], len(m.calls)
}

var _ driver.ManagementInterface = (*recordingManagement)(nil)

// bind binds a driver with boot b and management m to t.
func bind(t *driver.Task, name string, b driver.BootInterface, m driver.ManagementInterface) {
	d, err := driver.NewDriver("ipmi", map[driver.Kind]driver.Implementation{
		driver.KindBoot:       {Kind: driver.KindBoot, Name: name, Impl: b},
		driver.KindManagement: {Kind: driver.KindManagement, Name: "recording", Impl: m},
	})
	if err != nil {
		panic(err)
	}
	t.BindDriver(d)
}
