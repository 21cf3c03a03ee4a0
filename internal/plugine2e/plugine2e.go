// Package plugine2e starts a conductor on SQLite whose registry includes a
// driver plugin served by its real process, for the end-to-end tests of
// the plugins under plugins/. Building, loading and the conformance suite
// are the public driver/plugin/plugintest; this package adds only what
// needs the engine, which a driver package must not import.
package plugine2e

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/statemachine"
)

// Conductor is a running conductor serving a plugin's hardware type.
type Conductor struct {
	*conductor.Conductor
	Store baremetal.Store
}

// StartConductor opens a SQLite store in the test's temporary directory,
// registers the direct deploy interface and binary's implementations
// (discovered by plugintest.Load under a host of their own) into reg,
// checks reg, and starts a conductor called hostname; everything is
// stopped when the test ends. The caller registers built-ins and any
// stand-ins into reg first.
func StartConductor(t testing.TB, reg *driver.Registry, binary, hostname string) *Conductor {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	agent, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(agent)); err != nil {
		t.Fatal(err)
	}
	plugintest.Load(t, binary, plugintest.Options{Registry: reg})
	cond, err := conductor.New(store, reg, conductor.Options{
		Agent:    conductor.AgentSettings{Client: agent},
		Hostname: hostname, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cond.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cond.Stop(sctx)
	})
	return &Conductor{Conductor: cond, Store: store}
}

// WaitState polls the node until it is in want and unreserved, and fails
// the test with the node's state, target, holder and last error after
// 30 s.
func (c *Conductor) WaitState(t testing.TB, uuid string, want statemachine.State) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := c.Store.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState == want && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: state %q target %q reserved by %q last error %q; want %q",
				uuid, n.ProvisionState, n.TargetProvisionState, n.Reservation, n.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
