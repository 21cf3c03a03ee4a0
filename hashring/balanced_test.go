package hashring

import (
	"cmp"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// naivePoint is a Balanced point computed straight from the package
// documentation's definition, without the packing or the bucket index.
type naivePoint struct {
	pos  uint64
	name string
}

func naiveBalancedPoints(members []Member) []naivePoint {
	var pts []naivePoint
	for _, m := range members {
		w := max(m.Weight, 1)
		seed := xxhash.Sum64String(m.Name)
		for n := range w * 512 {
			z := seed + uint64(n+1)*0x9e3779b97f4a7c15
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			z ^= z >> 31
			pts = append(pts, naivePoint{z &^ 0xffff, m.Name})
		}
	}
	slices.SortFunc(pts, func(a, b naivePoint) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return pts
}

// naiveRanking lists the first limit members in preference order for
// hash x: walk clockwise from the first point above x's top 48 bits.
func naiveRanking(pts []naivePoint, x uint64, limit int) []string {
	x48 := x &^ 0xffff
	start, _ := slices.BinarySearchFunc(pts, x48, func(p naivePoint, t uint64) int {
		if p.pos <= t {
			return -1
		}
		return 1
	})
	var out []string
	for i := 0; i < len(pts) && len(out) < limit; i++ {
		p := pts[(start+i)%len(pts)]
		if !slices.Contains(out, p.name) {
			out = append(out, p.name)
		}
	}
	return out
}

// TestBalancedFollowsDefinition checks Get and GetN against a direct
// transcription of the documented definition, including keys whose hash
// falls exactly on, just before and just after a point, and the wrap.
func TestBalancedFollowsDefinition(t *testing.T) {
	small := []Member{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}, {Name: "c.example.org", Weight: 1}, {Name: "d", Weight: 3}}
	// Large enough for the eight-points-per-bucket index.
	large := Names(memberNames(70)...)
	large[3].Weight = 4
	for _, members := range [][]Member{small, large} {
		t.Run(strconv.Itoa(len(members)), func(t *testing.T) { testBalancedDefinition(t, members) })
	}
}

func testBalancedDefinition(t *testing.T, members []Member) {
	r := mustNew(t, Config{}, members...)
	pts := naiveBalancedPoints(members)
	if len(pts) != len(r.bal.pts) {
		t.Fatalf("ring has %d points, definition %d", len(r.bal.pts), len(pts))
	}
	check := func(x uint64) {
		t.Helper()
		want := naiveRanking(pts, x, 4)
		i := r.bal.firstAfter(x)
		if got := r.names[r.bal.ownerAt(i)]; got != want[0] {
			t.Fatalf("hash %#x: owner %s, definition says %s", x, got, want[0])
		}
		// Walk like GetN does, from the same start.
		var got []string
		for j := 0; len(got) < len(want); j++ {
			n := r.names[r.bal.ownerAt((i+j)%len(r.bal.pts))]
			if !slices.Contains(got, n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("hash %#x: ranking %v, definition says %v", x, got, want)
		}
	}
	for _, p := range pts[:200] {
		check(p.pos)
		check(p.pos - 1)
		check(p.pos | 0xffff)
		check(p.pos + 0x10000)
	}
	check(0)
	check(^uint64(0))
	check(pts[len(pts)-1].pos)
	for _, k := range testKeys(200, 31) {
		want := naiveRanking(pts, xxhash.Sum64String(k), 4)
		got, err := r.GetN(nil, k, 4)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("GetN(%s) = %v, %v; definition says %v", k, got, err, want)
		}
	}
}
