package hashring

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

var algorithms = []Algorithm{Balanced, IronicCompatible}

func mustNew(t testing.TB, cfg Config, members ...Member) *Ring {
	t.Helper()
	r, err := New(cfg, members...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testKeys(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = randomUUID(rng)
	}
	return keys
}

func owners(t testing.TB, r *Ring, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		o, err := r.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = o
	}
	return out
}

func TestDeterministicAndOrderIndependent(t *testing.T) {
	keys := testKeys(3000, 1)
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			members := []Member{{Name: "a.example"}, {Name: "b.example", Weight: 3}, {Name: "c.example", Weight: 1}, {Name: "d.example", Weight: 2}, {Name: "e"}}
			want := owners(t, mustNew(t, Config{Algorithm: alg}, members...), keys)
			rng := rand.New(rand.NewPCG(7, 7))
			for range 5 {
				shuffled := slices.Clone(members)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				got := owners(t, mustNew(t, Config{Algorithm: alg}, shuffled...), keys)
				if !slices.Equal(got, want) {
					t.Fatalf("owners depend on member order %v", shuffled)
				}
			}
			r := mustNew(t, Config{Algorithm: alg}, members...)
			if got := r.Members(); !slices.IsSortedFunc(got, func(a, b Member) int { return compareStrings(a.Name, b.Name) }) || len(got) != 5 || got[4].Name != "e" || got[4].Weight != 1 || got[1].Weight != 3 {
				t.Fatalf("Members() = %v", got)
			}
			if !r.Contains("d.example") || r.Contains("x") || r.Len() != 5 {
				t.Fatal("Contains/Len disagree with the member list")
			}
		})
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestMinimalMovement checks, for both algorithms, that removing a member
// moves exactly the keys it owned and that adding one moves keys only to
// it; and that the ignore list predicts the removal.
func TestMinimalMovement(t *testing.T) {
	keys := testKeys(5000, 2)
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			cfg := Config{Algorithm: alg}
			names := memberNames(12)
			full := mustNew(t, cfg, Names(names...)...)
			before := owners(t, full, keys)
			for _, gone := range []string{names[0], names[5], names[11]} {
				rest := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == gone })
				smaller := mustNew(t, cfg, Names(rest...)...)
				after := owners(t, smaller, keys)
				var buf [1]string
				for i, k := range keys {
					if before[i] != gone && after[i] != before[i] {
						t.Fatalf("removing %s moved %s from %s to %s", gone, k, before[i], after[i])
					}
					if after[i] == gone {
						t.Fatalf("removed member %s still owns %s", gone, k)
					}
					takeover, err := full.GetN(buf[:0], k, 1, gone)
					if err != nil || takeover[0] != after[i] {
						t.Fatalf("GetN(%s, ignore %s) = %v, %v; ring without it says %s", k, gone, takeover, err, after[i])
					}
				}
				// Adding it back moves keys only to it: the reverse view.
				moves := Moves(smaller, full, keys)
				for _, m := range moves {
					if m.To != gone {
						t.Fatalf("adding %s moved %s from %s to %s", gone, m.Key, m.From, m.To)
					}
				}
				acquired, released := MovesFor(gone, smaller, full, keys)
				if len(acquired) != len(moves) || len(released) != 0 {
					t.Fatalf("MovesFor(%s) = %d acquired, %d released; Moves has %d", gone, len(acquired), len(released), len(moves))
				}
				if len(moves) == 0 {
					t.Fatalf("adding %s moved nothing", gone)
				}
			}
		})
	}
}

func TestGetNDistinctAndIgnore(t *testing.T) {
	keys := testKeys(500, 3)
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			names := memberNames(7)
			r := mustNew(t, Config{Algorithm: alg}, Names(names...)...)
			for _, k := range keys {
				all, err := r.GetN(nil, k, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(all) != len(names) {
					t.Fatalf("GetN(%s, 100) returned %d members, want all %d", k, len(all), len(names))
				}
				sorted := slices.Sorted(slices.Values(all))
				if !slices.Equal(sorted, names) {
					t.Fatalf("GetN(%s) = %v: not the distinct members", k, all)
				}
				owner, _ := r.Get(k)
				if all[0] != owner {
					t.Fatalf("GetN(%s)[0] = %s, Get = %s", k, all[0], owner)
				}
				// Ignoring the first i preferred members yields the rest
				// of the preference order.
				for i := 1; i < len(all); i++ {
					got, err := r.GetN([]string{"prefix"}, k, 3, append([]string{"not-a-member"}, all[:i]...)...)
					if err != nil {
						t.Fatal(err)
					}
					want := append([]string{"prefix"}, all[i:min(i+3, len(all))]...)
					if !slices.Equal(got, want) {
						t.Fatalf("GetN(%s, 3, ignore %v) = %v, want %v", k, all[:i], got, want)
					}
				}
				if _, err := r.GetN(nil, k, 1, names...); !errors.Is(err, ErrNoOwner) {
					t.Fatalf("GetN ignoring everyone: err = %v, want ErrNoOwner", err)
				}
				if got, err := r.GetN(nil, k, 0); err != nil || len(got) != 0 {
					t.Fatalf("GetN(0) = %v, %v", got, err)
				}
			}
		})
	}
}

func TestEmptyRing(t *testing.T) {
	for _, alg := range algorithms {
		r := mustNew(t, Config{Algorithm: alg})
		var nilRing *Ring
		for _, rr := range []*Ring{r, nilRing} {
			if _, err := rr.Get("k"); !errors.Is(err, ErrEmptyRing) {
				t.Fatalf("%v: Get on empty ring: err = %v", alg, err)
			}
			if _, err := rr.GetN(nil, "k", 2); !errors.Is(err, ErrEmptyRing) {
				t.Fatalf("%v: GetN on empty ring: err = %v", alg, err)
			}
			if rr.Len() != 0 || len(rr.Members()) != 0 || rr.Contains("k") {
				t.Fatalf("%v: empty ring reports members", alg)
			}
		}
	}
}

func TestInvalidInput(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		members []Member
		field   string
		index   int
		target  error
	}{
		{"empty name", Config{}, []Member{{Name: "a"}, {Name: ""}}, "name", 1, ErrInvalidMember},
		{"bad utf-8", Config{}, []Member{{Name: "a\xff"}}, "name", 0, ErrInvalidMember},
		{"negative weight", Config{}, []Member{{Name: "a", Weight: -1}}, "weight", 0, ErrInvalidMember},
		{"huge weight", Config{}, []Member{{Name: "a", Weight: MaxWeight + 1}}, "weight", 0, ErrInvalidMember},
		{"duplicate", Config{}, []Member{{Name: "b"}, {Name: "a"}, {Name: "b"}}, "name", 2, ErrInvalidMember},
		{"algorithm", Config{Algorithm: 9}, Names("a"), "Algorithm", 0, ErrInvalidConfig},
		{"exponent", Config{Algorithm: IronicCompatible, PartitionExponent: 17}, Names("a"), "PartitionExponent", 0, ErrInvalidConfig},
		{"hash", Config{Algorithm: IronicCompatible, HashAlgorithm: "blake2b"}, Names("a"), "HashAlgorithm", 0, ErrInvalidConfig},
		{"negative exponent", Config{Algorithm: IronicCompatible, PartitionExponent: -1}, Names("a"), "PartitionExponent", 0, ErrInvalidConfig},
	}
	for _, c := range cases {
		_, err := New(c.cfg, c.members...)
		if !errors.Is(err, c.target) {
			t.Fatalf("%s: err = %v, want %v", c.name, err, c.target)
		}
		var me *MemberError
		var ce *ConfigError
		switch {
		case errors.As(err, &me):
			if me.Field != c.field || me.Index != c.index {
				t.Fatalf("%s: %v names field %q index %d, want %q %d", c.name, err, me.Field, me.Index, c.field, c.index)
			}
		case errors.As(err, &ce):
			if ce.Field != c.field {
				t.Fatalf("%s: %v names field %q, want %q", c.name, err, ce.Field, c.field)
			}
		default:
			t.Fatalf("%s: %v is neither *MemberError nor *ConfigError", c.name, err)
		}
	}
}

// TestWeights checks that a member's share follows its weight.
func TestWeights(t *testing.T) {
	keys := testKeys(60000, 4)
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			cfg := Config{Algorithm: alg, PartitionExponent: 8}
			r := mustNew(t, cfg, Member{Name: "light", Weight: 1}, Member{Name: "heavy", Weight: 3})
			counts := map[string]int{}
			for _, o := range owners(t, r, keys) {
				counts[o]++
			}
			share := float64(counts["heavy"]) / float64(len(keys))
			if share < 0.68 || share > 0.82 {
				t.Fatalf("weight 3 of 4 got share %.3f, want about 0.75", share)
			}
		})
	}
}

func TestZeroAllocLookups(t *testing.T) {
	key := "cd613e30-d8f1-4adf-91b7-584a2265b1f5"
	for _, cfg := range []Config{{Algorithm: Balanced}, {Algorithm: IronicCompatible}, {Algorithm: IronicCompatible, HashAlgorithm: "sha256"}} {
		alg := cfg.Algorithm
		r := mustNew(t, cfg, Names(memberNames(100)...)...)
		dst := make([]string, 0, 3)
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := r.Get(key); err != nil {
				t.Fatal(err)
			}
			if _, err := r.GetN(dst[:0], key, 3, "conductor-001.example.org"); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("%v: lookups allocate %.1f times", alg, allocs)
		}
	}
	g, err := NewGroupRings(Config{}, []Conductor{{Name: "c1", HardwareTypes: []string{"ipmi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(200, func() {
		if _, err := g.Get("", "ipmi", key); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("GroupRings.Get allocates %.1f times", allocs)
	}
}

// TestHolderConcurrentSwap runs readers against a holder while a writer
// keeps swapping rings; with -race it proves the swap is safe, and every
// answer must come from one of the published rings.
func TestHolderConcurrentSwap(t *testing.T) {
	keys := testKeys(64, 5)
	a := mustNew(t, Config{}, Names("a1", "a2", "a3")...)
	b := mustNew(t, Config{}, Names("b1", "b2")...)
	h := NewHolder(a)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				owner, err := h.Load().Get(keys[i%len(keys)])
				if err != nil || !(a.Contains(owner) || b.Contains(owner)) {
					errs <- errors.New("reader saw owner " + owner)
					return
				}
			}
		}()
	}
	for i := range 2000 {
		if i%2 == 0 {
			h.Store(b)
		} else if old := h.Swap(a); old != b {
			t.Error("Swap returned the wrong previous ring")
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var zero Holder[GroupRings]
	if _, err := zero.Load().Get("", "ipmi", "k"); !errors.Is(err, ErrNoRing) {
		t.Fatalf("zero Holder: err = %v, want ErrNoRing", err)
	}
}
