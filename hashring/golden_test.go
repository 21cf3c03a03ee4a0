package hashring

import (
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/balanced-golden.json from the current code")

// balancedGolden is the shape of testdata/balanced-golden.json: owners
// and three-member preference lists computed by the Balanced algorithm.
// The algorithm is a contract between processes (every conductor must
// agree on every owner), so the file pins it: a change that alters an
// owner fails here and must be made deliberately, with -update.
type balancedGolden struct {
	Algorithm string `json:"algorithm"`
	Sets      []struct {
		Members []Member `json:"members"`
		Lookups []struct {
			Key   string   `json:"key"`
			Owner string   `json:"owner"`
			Top3  []string `json:"top3"`
		} `json:"lookups"`
	} `json:"sets"`
}

func TestBalancedGolden(t *testing.T) {
	const path = "testdata/balanced-golden.json"
	memberSets := [][]Member{
		Names("conductor-01", "conductor-02", "conductor-03"),
		Names(memberNames(10)...),
		{{Name: "small", Weight: 1}, {Name: "medium", Weight: 2}, {Name: "large", Weight: 4}},
	}
	var got balancedGolden
	got.Algorithm = Balanced.String()
	for si, ms := range memberSets {
		r := mustNew(t, Config{}, ms...)
		got.Sets = append(got.Sets, struct {
			Members []Member `json:"members"`
			Lookups []struct {
				Key   string   `json:"key"`
				Owner string   `json:"owner"`
				Top3  []string `json:"top3"`
			} `json:"lookups"`
		}{Members: ms})
		for _, k := range testKeys(100, uint64(100+si)) {
			o, _ := r.Get(k)
			top, _ := r.GetN(nil, k, 3)
			got.Sets[si].Lookups = append(got.Sets[si].Lookups, struct {
				Key   string   `json:"key"`
				Owner string   `json:"owner"`
				Top3  []string `json:"top3"`
			}{k, o, top})
		}
	}
	if *update {
		raw, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestBalancedGolden -update to create it)", err)
	}
	var want balancedGolden
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Sets) != len(got.Sets) {
		t.Fatalf("%s has %d sets, want %d", path, len(want.Sets), len(got.Sets))
	}
	for si := range want.Sets {
		w, g := want.Sets[si], got.Sets[si]
		for li := range w.Lookups {
			wl, gl := w.Lookups[li], g.Lookups[li]
			if wl.Key != gl.Key || wl.Owner != gl.Owner || len(wl.Top3) != len(gl.Top3) {
				t.Fatalf("set %d key %s: owner %s top3 %v, golden says %s %v", si, gl.Key, gl.Owner, gl.Top3, wl.Owner, wl.Top3)
			}
			for i := range wl.Top3 {
				if wl.Top3[i] != gl.Top3[i] {
					t.Fatalf("set %d key %s: top3 %v, golden says %v", si, gl.Key, gl.Top3, wl.Top3)
				}
			}
		}
	}
}
