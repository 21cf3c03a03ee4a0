package jsonmap

import (
	"reflect"
	"testing"
)

func TestCloneDoesNotAlias(t *testing.T) {
	if Clone(nil) != nil {
		t.Fatal("Clone(nil) != nil")
	}
	in := map[string]any{"a": map[string]any{"b": []any{1, map[string]any{"c": "d"}}}, "s": "x"}
	out := Clone(in)
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("Clone = %v, want %v", out, in)
	}
	out["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = "changed"
	out["a"].(map[string]any)["new"] = true
	if got := in["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"]; got != "d" {
		t.Errorf("nested map aliased: original now %v", got)
	}
	if _, ok := in["a"].(map[string]any)["new"]; ok {
		t.Error("nested map aliased: key added to the original")
	}
}
