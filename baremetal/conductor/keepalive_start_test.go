package conductor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// slowRecoveryStore makes node listings (the start-up recovery's first)
// wait until the conductor's keepalive is seen, or 5 s.
type slowRecoveryStore struct {
	baremetal.Store
	once      sync.Once
	keepalive chan struct{}
}

func (s *slowRecoveryStore) KeepaliveConductor(ctx context.Context, host string, online bool) error {
	s.once.Do(func() { close(s.keepalive) })
	return s.Store.KeepaliveConductor(ctx, host, online)
}

func (s *slowRecoveryStore) ListNodes(ctx context.Context, f baremetal.NodeFilter, p baremetal.Page) ([]*baremetal.Node, error) {
	select {
	case <-s.keepalive:
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.ListNodes(ctx, f, p)
}

// TestKeepaliveRunsDuringStartupRecovery: a starting conductor keeps its
// row alive while its start-up recovery reads the nodes. The keepalive
// loop used to start after the recovery, so a restarted conductor whose
// recovery took longer than the heartbeat timeout (a loaded database,
// many interrupted nodes) was dead to its peers, which broke the
// reservations it was working under (the chaos test's 500 nodes: a
// restarted conductor's reservations released by a peer 4 s after it
// came back). Here the recovery's listing waits for a keepalive, up to
// 5 s.
func TestKeepaliveRunsDuringStartupRecovery(t *testing.T) {
	t.Parallel()
	store := &slowRecoveryStore{Store: openStore(t, false), keepalive: make(chan struct{})}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: uniqueName("keepalive-start"), KeepaliveInterval: 10 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	select {
	case <-store.keepalive:
	default:
		t.Fatalf("no keepalive while the start-up recovery read the nodes (Launch took %s)", time.Since(start))
	}
}
