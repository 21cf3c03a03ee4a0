package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/clock"
)

func TestConformanceSQLiteFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock clock.Clock) baremetal.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "anvil.db"), clock)
	})
}

func TestConformanceSQLiteMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock clock.Clock) baremetal.Store {
		return openSQLite(t, ":memory:", clock)
	})
}

func TestConformanceSQLiteSingleProcess(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock clock.Clock) baremetal.Store {
		return openSQLiteOpts(t, filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{Clock: clock, SingleProcess: true})
	})
}

func TestSingleProcessLocksOthersOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "own.db")
	s := openSQLiteOpts(t, path, sqlstore.Options{SingleProcess: true})
	if err := s.CreateNode(context.Background(), &baremetal.Node{Name: "mine"}); err != nil {
		t.Fatal(err)
	}
	other, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{BusyTimeout: 50 * time.Millisecond})
	if err == nil {
		_, err = other.GetNode(context.Background(), "mine")
		_ = other.Close()
	}
	if err == nil {
		t.Fatal("a second store used a file held in single-process mode")
	}
}

func openSQLite(t testing.TB, path string, clock clock.Clock) *sqlstore.Store {
	t.Helper()
	return openSQLiteOpts(t, path, sqlstore.Options{Clock: clock})
}

func openSQLiteOpts(t testing.TB, path string, opts sqlstore.Options) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), path, opts)
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
	sqlstoretest.PostgresDSN(t) // skips without a database
	storetest.Run(t, func(t *testing.T, clock clock.Clock) baremetal.Store {
		return sqlstoretest.OpenPostgres(t, clock)
	})
}
