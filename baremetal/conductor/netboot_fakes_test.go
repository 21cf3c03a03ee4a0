package conductor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/anvilmetal/anvil/netboot"
)

// configStore is an in-memory netboot.ConfigStore standing in for the
// boot server's: it keeps each node's configuration, refuses a MAC of
// another node's, and logs every write ("put ramdisk/clean", "put local",
// "delete") so tests can check when the boot interface wrote what.
type configStore struct {
	mu      sync.Mutex
	configs map[string]netboot.Config
	log     map[string][]string
}

func newConfigStore() *configStore {
	return &configStore{configs: map[string]netboot.Config{}, log: map[string][]string{}}
}

func (s *configStore) PutConfig(ctx context.Context, c netboot.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, other := range s.configs {
		if node == c.Node {
			continue
		}
		for _, m := range c.MACs {
			if slices.Contains(other.MACs, m) {
				return fmt.Errorf("configstore: MAC %s belongs to node %s", m, node)
			}
		}
	}
	s.configs[c.Node] = c
	entry := "put " + string(c.Action)
	if c.Purpose != "" {
		entry += "/" + c.Purpose
	}
	s.log[c.Node] = append(s.log[c.Node], entry)
	return nil
}

func (s *configStore) DeleteConfig(ctx context.Context, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.configs[node]; ok {
		s.log[node] = append(s.log[node], "delete")
	}
	delete(s.configs, node)
	return nil
}

// get returns the node's configuration.
func (s *configStore) get(node string) (netboot.Config, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.configs[node]
	return c, ok
}

// forMAC returns the configuration keyed by mac, as the boot server
// finds it for a machine asking.
func (s *configStore) forMAC(mac string) (netboot.Config, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.configs {
		if slices.Contains(c.MACs, mac) {
			return c, true
		}
	}
	return netboot.Config{}, false
}

// writes returns the node's write log.
func (s *configStore) writes(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log[node])
}

var _ netboot.ConfigStore = (*configStore)(nil)
