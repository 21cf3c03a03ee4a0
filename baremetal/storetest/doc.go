// Package storetest is the conformance suite of baremetal.Store: every
// behaviour the Store contract promises, written once and run against
// every implementation. The sqlx store runs it on SQLite always and on
// PostgreSQL when ANVIL_TEST_POSTGRES_DSN is set; an embedder with its own
// Store runs it the same way.
//
// It also holds the tools the suite is made of, public so that engine
// and embedder tests can reuse them: ManualClock, a clock.Clock that
// moves only when told to; Hammer, the lock stress workload that proves
// no two holders ever overlap and no update is lost; and DiffNodes.
//
// # Usage
//
// Give Run a Factory that returns a fresh, empty store reading time from
// the given clock:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock clock.Clock) baremetal.Store {
//			s, err := mystore.Open(t.TempDir(), clock)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Run the stress workload against a store shared by several goroutines
// (and, for a shared database, several processes) and check its result:
//
//	res, err := storetest.Hammer(ctx, s, storetest.HammerConfig{
//		Nodes: uuids, Workers: 8, Holder: "proc-1", Duration: 2 * time.Second,
//	})
package storetest
