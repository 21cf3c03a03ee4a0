package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
)

func TestConformanceSQLiteFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock baremetal.Clock) baremetal.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "anvil.db"), clock)
	})
}

func TestConformanceSQLiteMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock baremetal.Clock) baremetal.Store {
		return openSQLite(t, ":memory:", clock)
	})
}

func openSQLite(t testing.TB, path string, clock baremetal.Clock) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{Clock: clock})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformancePostgres(t *testing.T) {
	storetest.PostgresDSN(t) // skips without a database
	storetest.Run(t, func(t *testing.T, clock baremetal.Clock) baremetal.Store {
		return storetest.OpenPostgres(t, clock)
	})
}
