package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestMain makes the test binary the conductor child when bench starts
// it.
func TestMain(m *testing.M) {
	if dir := os.Getenv(conductorEnv); dir != "" {
		if err := conductor(dir); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBench runs both ways with a small image: directly the origin
// sends the image once per agent and the conductor does nothing;
// through the cache the origin sends it once and the conductor works.
func TestBench(t *testing.T) {
	var out bytes.Buffer
	res, err := bench(&out, 4, "8MiB", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	direct, cached := res[0], res[1]
	if direct.originBytes != 4*8<<20 || cached.originBytes != 8<<20 {
		t.Fatalf("origin bytes: direct %d, cached %d\n%s", direct.originBytes, cached.originBytes, out.String())
	}
	if !strings.Contains(out.String(), "through the conductor's cache") {
		t.Fatalf("output:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}
