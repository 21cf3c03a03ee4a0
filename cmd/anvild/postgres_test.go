package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestTwoAnvildShareOnePostgres runs two anvild on one PostgreSQL schema,
// as several conductors share Ironic's database: a node enrolled through
// one is served by the other, and both stop cleanly.
func TestTwoAnvildShareOnePostgres(t *testing.T) {
	dsn := os.Getenv("ANVIL_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("ANVIL_TEST_POSTGRES_DSN not set")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "anvild_test_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	a := startAnvild(t, "--database-connection", u.String(), "--host", "anvild-a")
	bd := startAnvild(t, "--database-connection", u.String(), "--host", "anvild-b")
	hc := &http.Client{Timeout: 10 * time.Second}
	body, _ := json.Marshal(map[string]any{"name": "shared-1", "driver": "fake-hardware"})
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/v1/nodes", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create through anvild-a: %s", resp.Status)
	}
	code, _, got := get(t, hc, bd.URL+"/v1/nodes/shared-1", "X-OpenStack-Ironic-API-Version", "1.78")
	var n struct {
		Name           string `json:"name"`
		ProvisionState string `json:"provision_state"`
	}
	if err := json.Unmarshal([]byte(got), &n); err != nil || code != 200 || n.Name != "shared-1" || n.ProvisionState != "enroll" {
		t.Fatalf("GET through anvild-b: %d %s", code, got)
	}
	for _, d := range []*daemonProc{a, bd} {
		if _, err := d.stop(t, 20*time.Second); err != nil {
			t.Fatalf("exit: %v\n%s", err, d.stderr)
		}
	}
}
