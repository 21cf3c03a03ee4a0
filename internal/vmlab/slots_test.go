package vmlab

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSlotsLimitVMs(t *testing.T) {
	t.Setenv(EnvSlots, "1")
	dir := t.TempDir() // not the machine's slots: a VM elsewhere may hold one
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := acquireSlot(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancelShort()
	if s, err := acquireSlot(short, dir); !errors.Is(err, context.DeadlineExceeded) {
		s.release()
		t.Fatalf("second slot with one allowed: %v, want DeadlineExceeded", err)
	}
	first.release()
	second, err := acquireSlot(ctx, dir)
	if err != nil {
		t.Fatalf("slot after release: %v", err)
	}
	second.release()
	t.Setenv(EnvSlots, "0")
	if _, err := acquireSlot(ctx, dir); err == nil {
		t.Error("ANVIL_VMLAB_SLOTS=0 accepted")
	}
}
