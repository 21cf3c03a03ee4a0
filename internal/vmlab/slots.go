package vmlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// EnvSlots sets how many VMs may run at once on the machine, across every
// test process (default DefaultSlots): `go test ./...` runs packages in
// parallel, and two TCG guests already take both cores of these machines.
const EnvSlots = "ANVIL_VMLAB_SLOTS"

// DefaultSlots is the machine-wide VM limit without ANVIL_VMLAB_SLOTS.
const DefaultSlots = 2

// slotDir holds one lock file per slot; a slot is held by an flock on its
// file, which the kernel releases when the holder exits however it exits.
func slotDir() string { return filepath.Join(os.TempDir(), "anvil-vmlab-slots") }

// slot is a held VM slot.
type slot struct{ f *os.File }

// acquireSlot waits for a free slot of dir, polling, until ctx ends.
func acquireSlot(ctx context.Context, dir string) (*slot, error) {
	n := DefaultSlots
	if v := os.Getenv(EnvSlots); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 {
			return nil, fmt.Errorf("vmlab: %s=%q: want a positive number", EnvSlots, v)
		}
		n = i
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("vmlab: VM slots: %w", err)
	}
	for {
		for i := 0; i < n; i++ {
			f, err := os.OpenFile(filepath.Join(dir, "slot-"+strconv.Itoa(i)), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return nil, fmt.Errorf("vmlab: VM slots: %w", err)
			}
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				return &slot{f: f}, nil
			}
			f.Close()
			if !errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("vmlab: VM slots: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("vmlab: waiting for one of %d VM slots (%s): %w", n, EnvSlots, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// release frees the slot (closing the file drops the lock).
func (s *slot) release() {
	if s != nil && s.f != nil {
		s.f.Close()
		s.f = nil
	}
}
