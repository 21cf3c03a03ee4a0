package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
)

// TestKeepaliveDoesNotQueueBehindNodeWork: on PostgreSQL a conductor's
// keepalive lands while node work holds every connection of the store's
// pool. It used to wait for one of them: in the chaos test's 500-node
// fleet a restarted conductor's keepalive was late by more than the
// heartbeat timeout, so its peers took it for dead and broke the
// reservations it was working under. (The 10 s context only ends a
// keepalive that waits for the pool; it lands in milliseconds.)
func TestKeepaliveDoesNotQueueBehindNodeWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlstore.OpenPostgres(ctx, sqlstoretest.PostgresDSN(t), sqlstore.Options{MaxOpenConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.RegisterConductor(ctx, baremetal.ConductorRegistration{Hostname: "c1"}); err != nil {
		t.Fatal(err)
	}
	release, err := sqlstore.HoldConnsForTest(ctx, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.KeepaliveConductor(kctx, "c1", true); err != nil {
		t.Fatalf("keepalive with the pool held by node work: %v", err)
	}
	if err := s.DrainConductor(kctx, "c1"); err != nil {
		t.Fatalf("drain with the pool held by node work: %v", err)
	}
}
