// Package netboottest holds a test double of the boot server for the
// tests of boot interfaces and of code that drives them: Store, an
// in-memory netboot.ConfigStore that keeps what the boot interfaces wrote
// and a log of every write, without the boot loaders, sockets or checks
// of a real netboot.Server (it refuses what the server refuses, but for
// the boot loader and image files the server reads).
package netboottest

import (
	"context"
	"slices"
	"sync"

	"github.com/anvilmetal/anvil/netboot"
)

// Store is an in-memory netboot.ConfigStore. Like netboot.Server it
// refuses, changing nothing, an invalid configuration
// (netboot.Config.Normalize's *netboot.InvalidConfigError) and one naming
// a MAC of another node's (*netboot.MACInUseError); unlike the server it
// does not look for boot loader files or local kernel and ramdisk files.
// It keeps configurations normalised (MACs lower case with colons, no
// duplicates), as the server does. It logs each write per
// node: "put <action>/<purpose>" ("put ramdisk/clean", "put local") and
// "delete" (only for a node that had a configuration). It is safe for
// concurrent use.
type Store struct {
	mu      sync.Mutex
	configs map[string]netboot.Config
	log     map[string][]string
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{configs: map[string]netboot.Config{}, log: map[string][]string{}}
}

// PutConfig keeps c, normalised, as its node's configuration.
func (s *Store) PutConfig(_ context.Context, c netboot.Config) error {
	c, err := c.Normalize()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, other := range s.configs {
		if node == c.Node {
			continue
		}
		for _, m := range c.MACs {
			if slices.Contains(other.MACs, m) {
				return &netboot.MACInUseError{MAC: m, Node: c.Node, Owner: node}
			}
		}
	}
	c.MACs = slices.Clone(c.MACs)
	c.Params = slices.Clone(c.Params)
	s.configs[c.Node] = c
	entry := "put " + string(c.Action)
	if c.Purpose != "" {
		entry += "/" + c.Purpose
	}
	s.log[c.Node] = append(s.log[c.Node], entry)
	return nil
}

// DeleteConfig forgets the node's configuration.
func (s *Store) DeleteConfig(_ context.Context, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.configs[node]; ok {
		s.log[node] = append(s.log[node], "delete")
	}
	delete(s.configs, node)
	return nil
}

// Config returns the node's configuration.
func (s *Store) Config(node string) (netboot.Config, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.configs[node]
	return c, ok
}

// ForMAC returns the configuration keyed by mac (in any form ParseMAC
// accepts), as the boot server finds it for a machine asking.
func (s *Store) ForMAC(mac string) (netboot.Config, bool) {
	if m, ok := netboot.ParseMAC(mac); ok {
		mac = m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.configs {
		if slices.Contains(c.MACs, mac) {
			return c, true
		}
	}
	return netboot.Config{}, false
}

// Writes returns the node's write log, oldest first.
func (s *Store) Writes(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log[node])
}

var _ netboot.ConfigStore = (*Store)(nil)
