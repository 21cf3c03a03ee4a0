package pxe_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/noop"
	"github.com/anvilmetal/anvil/netboot"
)

// memStore is an in-memory netboot.ConfigStore that refuses a MAC of
// another node's configuration, as the contract says.
type memStore struct {
	mu      sync.Mutex
	configs map[string]netboot.Config
	deletes int
}

func newMemStore() *memStore { return &memStore{configs: map[string]netboot.Config{}} }

func (s *memStore) PutConfig(ctx context.Context, c netboot.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, other := range s.configs {
		if node == c.Node {
			continue
		}
		for _, m := range c.MACs {
			if slices.Contains(other.MACs, m) {
				return fmt.Errorf("memstore: MAC %s belongs to node %s", m, node)
			}
		}
	}
	s.configs[c.Node] = c
	return nil
}

func (s *memStore) DeleteConfig(ctx context.Context, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.configs, node)
	s.deletes++
	return nil
}

func (s *memStore) get(node string) (netboot.Config, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.configs[node]
	return c, ok
}

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
