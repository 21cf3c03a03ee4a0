package ironicapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// downStore fails every read of a node, when down, with the error pgx
// gives for a PostgreSQL server that went away: its text names the
// database user, the database, the host and the port.
type downStore struct {
	baremetal.Store
	down atomic.Bool
}

func (s *downStore) GetNode(ctx context.Context, ident string) (*baremetal.Node, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("sqlstore: reading node %s: failed to connect to `user=anvil_admin database=anvil_prod`: 10.1.2.3:6543 (db.internal.example): dial error: %w",
			ident, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	}
	return s.Store.GetNode(ctx, ident)
}

// TestServerErrorHidesInternals: a request failing on the database gets
// Ironic's generic 500 text with the request's id, which is also the
// X-OpenStack-Request-Id header; the database's user, name, host and
// port are only in the log, under that id.
func TestServerErrorHidesInternals(t *testing.T) {
	store := &downStore{Store: sqlstoretest.OpenSQLite(t, clock.System())}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "api-internals"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	var logs bytes.Buffer
	h, err := ironicapi.New(ironicapi.Options{Conductor: c, Drivers: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}

	store.down.Store(true)
	for _, path := range []string{"/v1/nodes/" + n.UUID, "/v1/nodes/" + n.UUID + "/states"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("GET %s: %d %s, want 500", path, resp.StatusCode, body)
		}
		reqID := resp.Header.Get("X-OpenStack-Request-Id")
		if !strings.HasPrefix(reqID, "req-") {
			t.Fatalf("GET %s: X-OpenStack-Request-Id = %q, want req-<uuid>", path, reqID)
		}
		for _, leak := range []string{"anvil_admin", "anvil_prod", "10.1.2.3", "6543", "db.internal.example", "user=", "database="} {
			if strings.Contains(string(body), leak) {
				t.Errorf("GET %s: the 500 body carries %q: %s", path, leak, body)
			}
		}
		var outer struct {
			ErrorMessage string `json:"error_message"`
		}
		var inner struct {
			FaultString string `json:"faultstring"`
		}
		if err := json.Unmarshal(body, &outer); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil {
			t.Fatal(err)
		}
		if want := "An unknown exception occurred. Request ID: " + reqID; inner.FaultString != want {
			t.Errorf("GET %s: faultstring %q, want %q", path, inner.FaultString, want)
		}
		if !strings.Contains(logs.String(), reqID) || !strings.Contains(logs.String(), "10.1.2.3:6543") {
			t.Errorf("GET %s: the log has no detail under %s:\n%s", path, reqID, logs.String())
		}
	}
}
