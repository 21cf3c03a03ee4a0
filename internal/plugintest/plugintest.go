// Package plugintest is the test harness the driver plugin binaries under
// plugins/ share: it builds the plugin under test once per test binary,
// loads it under a real plugin host, captures the host's logs, and starts
// a conductor on SQLite whose registry includes the plugin, so each
// plugin's tests only say what is particular to its hardware.
package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/statemachine"
)

// Main is a TestMain body: it builds the package in the current directory
// (the plugin's main package) as an executable called name in a temporary
// directory, stores its path in *binary, runs the tests and exits with
// their status. A build failure is reported and fails the run.
func Main(m *testing.M, name string, binary *string) {
	os.Exit(run(m, name, binary))
}

func run(m *testing.M, name string, binary *string) int {
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*binary = filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", *binary, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the plugin:", err)
		return 1
	}
	return m.Run()
}

// SyncBuffer is a log sink safe for the host's concurrent writers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Load starts binary under a fresh host (closed when the test ends) and
// returns the host, the plugin and the bundle it describes. When logs is
// not nil the host's and the plugin's log lines go there at trace level.
func Load(t testing.TB, binary string, logs io.Writer) (*plugin.Host, *plugin.Plugin, driver.Bundle) {
	t.Helper()
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	}
	host := plugin.NewHost(plugin.HostConfig{Logger: logger})
	t.Cleanup(func() { host.Close() })
	p, err := host.Load(context.Background(), binary)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Bundle()
	if err != nil {
		t.Fatal(err)
	}
	return host, p, b
}

// Conductor is a running conductor serving a plugin's hardware type.
type Conductor struct {
	*conductor.Conductor
	Store baremetal.Store
}

// StartConductor opens a SQLite store in the test's temporary directory,
// registers the direct deploy interface and binary's implementations
// (through a host of their own) into reg, checks reg, and starts a
// conductor called hostname; everything is stopped when the test ends.
// The caller registers built-ins and any stand-ins into reg first.
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
	host := plugin.NewHost(plugin.HostConfig{})
	t.Cleanup(func() { host.Close() })
	if _, err := host.Load(ctx, binary); err != nil {
		t.Fatal(err)
	}
	if err := host.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	cond, err := conductor.New(store, reg, conductor.Options{
		Agent:    conductor.AgentSettings{Client: agent},
		Hostname: hostname, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cond.Start(ctx); err != nil {
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
		if n.ProvisionState == string(want) && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: state %q target %q reserved by %q last error %q; want %q",
				uuid, n.ProvisionState, n.TargetProvisionState, n.Reservation, n.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
