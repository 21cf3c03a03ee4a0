package hashring

import (
	"errors"
	"slices"
	"testing"
)

func TestGroupRings(t *testing.T) {
	conductors := []Conductor{
		{Name: "c1", Group: "", HardwareTypes: []string{"ipmi", "redfish"}},
		{Name: "c2", Group: "", HardwareTypes: []string{"redfish", "redfish"}},
		{Name: "c3", Group: "Rack-B", HardwareTypes: []string{"ipmi"}},
		{Name: "c4", Group: "rack-b", HardwareTypes: []string{"ipmi", "fake-hardware"}},
		{Name: "c5", Group: "rack-c"},
	}
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			cfg := Config{Algorithm: alg}
			g, err := NewGroupRings(cfg, conductors)
			if err != nil {
				t.Fatal(err)
			}
			wantKeys := []string{":ipmi", ":redfish", "rack-b:fake-hardware", "rack-b:ipmi"}
			if got := g.Keys(); !slices.Equal(got, wantKeys) || g.Len() != 4 {
				t.Fatalf("Keys() = %v (Len %d), want %v", got, g.Len(), wantKeys)
			}
			members := map[string][]string{":ipmi": {"c1"}, ":redfish": {"c1", "c2"}, "rack-b:ipmi": {"c3", "c4"}, "rack-b:fake-hardware": {"c4"}}
			for key, want := range members {
				group, hw, _ := cut(key)
				r, err := g.Ring(group, hw)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, m := range r.Members() {
					got = append(got, m.Name)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("ring %s has %v, want %v", key, got, want)
				}
				// The group ring agrees with a ring built directly.
				direct := mustNew(t, cfg, Names(want...)...)
				for _, k := range testKeys(200, 9) {
					a, err1 := g.Get(group, hw, k)
					b, err2 := direct.Get(k)
					if err1 != nil || err2 != nil || a != b {
						t.Fatalf("%s: group ring says %s (%v), direct ring %s (%v)", key, a, err1, b, err2)
					}
				}
			}
			// Group names are case-insensitive.
			if _, err := g.Ring("RACK-B", "ipmi"); err != nil {
				t.Fatalf("upper-case group: %v", err)
			}
			// No fallback between groups, and no ring for unserved types.
			for _, c := range [][2]string{{"rack-c", "ipmi"}, {"", "fake-hardware"}, {"rack-b", "redfish"}} {
				_, err := g.Get(c[0], c[1], "k")
				var nr *NoRingError
				if !errors.Is(err, ErrNoRing) || !errors.As(err, &nr) || nr.Group != c[0] || nr.HardwareType != c[1] {
					t.Fatalf("Get(%q, %q): err = %v, want a NoRingError naming them", c[0], c[1], err)
				}
			}
			if GroupKey("Rack-B", "ipmi") != "rack-b:ipmi" {
				t.Fatalf("GroupKey = %q", GroupKey("Rack-B", "ipmi"))
			}
		})
	}
}

func cut(key string) (string, string, bool) {
	for i := range len(key) {
		if key[i] == ':' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

func TestGroupRingsInvalid(t *testing.T) {
	cases := []struct {
		name  string
		in    []Conductor
		index int
		field string
	}{
		{"empty name", []Conductor{{Name: "a", HardwareTypes: []string{"x"}}, {HardwareTypes: []string{"x"}}}, 1, "name"},
		{"duplicate", []Conductor{{Name: "a"}, {Name: "b"}, {Name: "a"}}, 2, "name"},
		{"empty type", []Conductor{{Name: "a", HardwareTypes: []string{""}}}, 0, "hardware_types"},
		{"colon", []Conductor{{Name: "a", HardwareTypes: []string{"x:y"}}}, 0, "hardware_types"},
		{"weight", []Conductor{{Name: "ok", HardwareTypes: []string{"x"}}, {Name: "a", HardwareTypes: []string{"x"}, Weight: -2}}, 1, "weight"},
	}
	for _, c := range cases {
		_, err := NewGroupRings(Config{}, c.in)
		var me *MemberError
		if !errors.Is(err, ErrInvalidMember) || !errors.As(err, &me) || me.Index != c.index || me.Field != c.field {
			t.Fatalf("%s: err = %v, want MemberError index %d field %s", c.name, err, c.index, c.field)
		}
	}
	if _, err := NewGroupRings(Config{Algorithm: 7}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad config: err = %v", err)
	}
	g, err := NewGroupRings(Config{}, nil)
	if err != nil || g.Len() != 0 || len(g.Keys()) != 0 {
		t.Fatalf("no conductors: %v, %d rings", err, g.Len())
	}
}
