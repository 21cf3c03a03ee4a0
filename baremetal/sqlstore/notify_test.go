package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/internal/faultlab"
)

// proxied returns dsn rewritten to go through a new faultlab proxy.
func proxied(t *testing.T, dsn string) (*faultlab.Proxy, string) {
	t.Helper()
	up, err := faultlab.Upstream(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultlab.Listen(up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	pdsn, err := faultlab.RewriteDSN(dsn, p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return p, pdsn
}

func receive(t *testing.T, ch <-chan string, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("notification %q not received within %v", want, within)
		}
	}
}

// TestNotifierOutlivesAnOutage: a notifier whose connections were cut
// publishes its first notification after the database's return (a
// conductor's shutdown notice, say) on a new connection rather than
// losing it, and its listener listens again, so a peer's notification
// reaches it.
func TestNotifierOutlivesAnOutage(t *testing.T) {
	dsn := sqlstoretest.PostgresDSN(t)
	// The schema's tables, as a store opening it would make them.
	s, err := sqlstore.OpenPostgres(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, pdsn := proxied(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut, err := sqlstore.NewNotifier(ctx, pdsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	peer, err := sqlstore.NewNotifier(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	atPeer, stopPeer := peer.Subscribe(baremetal.TopicMembership)
	defer stopPeer()
	atCut, stopCut := cut.Subscribe(baremetal.TopicIntent)
	defer stopCut()

	// Both connections work before the cut.
	if err := cut.Publish(ctx, baremetal.TopicMembership, "before"); err != nil {
		t.Fatal(err)
	}
	receive(t, atPeer, "before", 10*time.Second)

	p.Cut()
	time.Sleep(2 * time.Second)
	p.Restore()

	// The first publish after the return goes through.
	if err := cut.Publish(ctx, baremetal.TopicMembership, "shutdown"); err != nil {
		t.Fatalf("first publish after the outage: %v", err)
	}
	receive(t, atPeer, "shutdown", 10*time.Second)

	// The listener is back: a peer's notification arrives. It may
	// miss those sent before it re-listened, so the peer repeats
	// until one arrives, within the listener's reconnect bound.
	start := time.Now()
	for {
		if err := peer.Publish(ctx, baremetal.TopicIntent, "after"); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-atCut:
			if got == "after" {
				t.Logf("listener back %v after the restore", time.Since(start))
				return
			}
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the listener did not listen again within 5 s of the database's return")
		}
	}
}
