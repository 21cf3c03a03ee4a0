package sqlstore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

// TestJSONColumnsKeepExactNumbers checks that a number float64 would
// change (a step argument such as 9007199254740993 or 1.0) is read back
// from a JSON column exactly, as json.Number, while ordinary numbers are
// still float64. Before, every number came back as float64 and the two
// read back as 9007199254740992 and 1.
func TestJSONColumnsKeepExactNumbers(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "anvil.db"), nil)
	n := &baremetal.Node{Name: "exact", DriverInternalInfo: map[string]any{
		"clean_steps": []any{map[string]any{"interface": "deploy", "step": "x", "priority": float64(10),
			"args": map[string]any{"count": json.Number("9007199254740993"), "ratio": json.Number("1.0")}}},
		"counter": float64(3),
	}}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(got.DriverInternalInfo["clean_steps"])
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"args":{"count":9007199254740993,"ratio":1.0},"interface":"deploy","priority":10,"step":"x"}]`; string(raw) != want {
		t.Errorf("clean_steps read back as %s, want %s", raw, want)
	}
	if c, ok := got.DriverInternalInfo["counter"].(float64); !ok || c != 3 {
		t.Errorf("counter read back as %#v, want float64 3", got.DriverInternalInfo["counter"])
	}
}
