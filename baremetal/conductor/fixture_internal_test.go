package conductor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// sqliteAndFakeRegistry opens a SQLite store in t's temporary directory
// (closed when t ends) and a registry with the fake hardware type, the
// fixture the package's internal tests build their conductor on.
func sqliteAndFakeRegistry(t *testing.T) (*sqlstore.Store, *driver.Registry) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	return st, reg
}

// launchQuiet starts a conductor on store with reg and o, its periodic
// tasks off (the test runs them), and stops it when t ends.
func launchQuiet(t *testing.T, store baremetal.Store, reg *driver.Registry, o Options) *Conductor {
	t.Helper()
	o.SyncPowerStateInterval, o.CheckProvisionStateInterval, o.PowerFailureRecoveryInterval = -1, -1, -1
	c, err := New(store, reg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}
