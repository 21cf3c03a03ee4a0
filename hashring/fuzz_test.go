package hashring

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzRing builds rings of both algorithms from arbitrary member lists and
// keys and checks the ring's contract: build errors are typed; every
// owner is a member; the build does not depend on member order; GetN
// returns distinct members led by Get's answer and honours the ignore
// list; removing a member moves only the keys it owned, to the member
// GetN named as the next in line.
func FuzzRing(f *testing.F) {
	f.Add("conductor-01,conductor-02,conductor-03", "cd613e30-d8f1-4adf-91b7-584a2265b1f5", uint8(0), uint8(1))
	f.Add("a,b", "", uint8(1), uint8(0))
	f.Add("x", "key", uint8(3), uint8(0))
	f.Add("c0.example.org,c1.example.org,c2.example.org,c3.example.org", "d95bafc8-f2a4-427b-9cf4-bb99f4bea973", uint8(2), uint8(3))
	f.Add("ü,ÿ,\x00,\xff", "\xff\xfe", uint8(0), uint8(2))
	f.Add("dup,dup", "k", uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, memberList, key string, weight, drop uint8) {
		names := strings.Split(memberList, ",")
		if len(names) > 64 {
			names = names[:64]
		}
		members := Names(names...)
		members[0].Weight = int(weight % 4)
		for _, alg := range algorithms {
			cfg := Config{Algorithm: alg}
			r, err := New(cfg, members...)
			if err != nil {
				var me *MemberError
				if !errors.Is(err, ErrInvalidMember) || !errors.As(err, &me) {
					t.Fatalf("%v: build error %v is not a *MemberError", alg, err)
				}
				continue
			}
			reversed := slices.Clone(members)
			slices.Reverse(reversed)
			r2, err := New(cfg, reversed...)
			if err != nil {
				t.Fatalf("%v: reversed members fail: %v", alg, err)
			}
			owner, err := r.Get(key)
			if err != nil || !r.Contains(owner) {
				t.Fatalf("%v: Get(%q) = %q, %v", alg, key, owner, err)
			}
			if o2, _ := r2.Get(key); o2 != owner {
				t.Fatalf("%v: owner depends on member order: %q vs %q", alg, owner, o2)
			}
			all, err := r.GetN(nil, key, len(names)+1)
			if err != nil || len(all) != r.Len() || all[0] != owner {
				t.Fatalf("%v: GetN(%q) = %q, %v; want %d members led by %q", alg, key, all, err, r.Len(), owner)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(all)))) != len(all) {
				t.Fatalf("%v: GetN returned duplicates: %q", alg, all)
			}
			gone := names[int(drop)%len(names)]
			rest := slices.DeleteFunc(slices.Clone(members), func(m Member) bool { return m.Name == gone })
			smaller, err := New(cfg, rest...)
			if err != nil {
				t.Fatalf("%v: removing %q: %v", alg, gone, err)
			}
			after, err := smaller.Get(key)
			if len(rest) == 0 {
				if !errors.Is(err, ErrEmptyRing) {
					t.Fatalf("%v: empty ring: err = %v", alg, err)
				}
				if _, err := r.GetN(nil, key, 1, gone); !errors.Is(err, ErrNoOwner) {
					t.Fatalf("%v: ignoring the only member: err = %v", alg, err)
				}
				continue
			}
			if owner != gone && after != owner {
				t.Fatalf("%v: removing %q moved %q from %q to %q", alg, gone, key, owner, after)
			}
			next, err := r.GetN(nil, key, 1, gone)
			if err != nil || next[0] != after {
				t.Fatalf("%v: GetN ignoring %q = %q, %v; ring without it says %q", alg, gone, next, err, after)
			}
		}
	})
}
