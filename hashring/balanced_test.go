package hashring

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// naivePoint is a Balanced point computed straight from the package
// documentation's definition, without the packing or the bucket index.
type naivePoint struct {
	pos    uint64
	member int // index into the member list given to naiveBalancedPoints
}

func naiveSplitMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func naiveBalancedPoints(members []Member) []naivePoint {
	var pts []naivePoint
	for i, m := range members {
		w := max(m.Weight, 1)
		seed := xxhash.Sum64String(m.Name)
		for n := range w * 1024 {
			pts = append(pts, naivePoint{naiveSplitMix(seed+uint64(n+1)*0x9e3779b97f4a7c15) >> 32, i})
		}
	}
	return pts
}

// naiveRanking lists the first limit members in preference order for
// key hash x: every member's score is the clockwise distance from x's top
// 32 bits to its nearest point (1 to 2^32), times 2^e·(2^8 + f) with e
// the top 2 bits and f the next 8 bits of splitMix64(x XOR XXH64(name));
// the lowest score ranks first, equal scores by name.
func naiveRanking(members []Member, pts []naivePoint, x uint64, limit int) []string {
	dist := make([]uint64, len(members))
	for _, p := range pts {
		d := (p.pos-x>>32-1)&0xffffffff + 1
		if dist[p.member] == 0 || d < dist[p.member] {
			dist[p.member] = d
		}
	}
	type scored struct {
		name  string
		score uint64
	}
	var all []scored
	for i, d := range dist {
		u := naiveSplitMix(x ^ xxhash.Sum64String(members[i].Name))
		all = append(all, scored{members[i].Name, d * (1<<8 + (u>>54)&(1<<8-1)) << (u >> 62)})
	}
	slices.SortFunc(all, func(a, b scored) int {
		if c := cmp.Compare(a.score, b.score); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	var out []string
	for _, s := range all[:min(limit, len(all))] {
		out = append(out, s.name)
	}
	return out
}

// TestBalancedFollowsDefinition checks Get and GetN against a direct
// transcription of the documented definition, including key hashes that
// fall exactly on, just before and just after a point, and the wrap.
func TestBalancedFollowsDefinition(t *testing.T) {
	small := []Member{{Name: "a", Weight: 1}, {Name: "b", Weight: 2}, {Name: "c.example.org", Weight: 1}, {Name: "d", Weight: 3}}
	// Large enough for an index wider than the minimum 16 bits, where
	// stored points keep fewer position bits.
	large := Names(memberNames(100)...)
	large[3].Weight = 420
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
	limit := min(len(members), 6)
	check := func(x uint64) {
		t.Helper()
		want := naiveRanking(members, pts, x, limit)
		if got := r.names[r.bal.owner(x)]; got != want[0] {
			t.Fatalf("hash %#x: owner %s, definition says %s", x, got, want[0])
		}
		seen := make([]uint64, (len(r.names)+63)/64)
		if got := r.bal.appendRanked(nil, r.names, x, limit, seen); !slices.Equal(got, want) {
			t.Fatalf("hash %#x: ranking %v, definition says %v", x, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 60 {
		p := pts[rng.IntN(len(pts))]
		low := rng.Uint64() & 0xffffffff
		check(p.pos<<32 | low)
		check((p.pos-1)<<32 | low)
		check((p.pos+1)<<32 | low)
	}
	check(0)
	check(^uint64(0))
	for _, k := range testKeys(60, 31) {
		want := naiveRanking(members, pts, xxhash.Sum64String(k), limit)
		got, err := r.GetN(nil, k, limit)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("GetN(%s) = %v, %v; definition says %v", k, got, err, want)
		}
	}
	// The whole ranking, which walks the whole ring.
	k := testKeys(1, 32)[0]
	want := naiveRanking(members, pts, xxhash.Sum64String(k), len(members))
	if got, err := r.GetN(nil, k, len(members)); err != nil || !slices.Equal(got, want) {
		t.Fatalf("GetN(%s, all) = %v, %v; definition says %v", k, got, err, want)
	}
}

// sampleHashes is the number of key hashes the balance test and the
// benchmark spread over a ring: evenly spread 64-bit values (the SplitMix64
// stream from 0), standing in for XXH64 of as many node UUIDs. Their
// sampling noise is sqrt(n/sampleHashes) per member, 0.7% at 100 members.
const sampleHashes = 1 << 21

func sampleHash(i int) uint64 { return splitMix64(uint64(i+1) * golden) }

// hashShares returns each member's share of sampleHashes key hashes,
// relative to the mean (1 is a fair share), in r's member order.
func hashShares(r *Ring) []float64 {
	counts := make([]float64, r.Len())
	for i := range sampleHashes {
		counts[r.bal.owner(sampleHash(i))]++
	}
	for i := range counts {
		counts[i] *= float64(r.Len()) / sampleHashes
	}
	return counts
}

// TestBalancedBalanceAndMovement keeps the Balanced ring's two promises at
// 100 members: the most loaded member owns at most 5% more keys than the
// mean, and a member joining or leaving moves its own share (within 5%
// of the ideal 1/n) and nothing else: every key that moves, moves to or
// from it. It counts over sampleHashes key hashes rather than 100,000
// UUIDs, whose sampling noise alone (3% per member, 9.4% for the most
// loaded of 100) exceeds the bound for any placement.
func TestBalancedBalanceAndMovement(t *testing.T) {
	const n, limit = 100, 1.05
	names := memberNames(n)
	r := mustNew(t, Config{}, Names(names...)...)
	shares := hashShares(r)
	if mx, _ := spread(shares); mx > limit {
		t.Fatalf("%d members: most loaded member owns %.4f of the mean, want <= %.2f", n, mx, limit)
	}
	// moved compares the owners of the sample hashes before and after a
	// change and returns the fraction that moved, failing on any move
	// that does not involve changed.
	moved := func(before, after *Ring, changed string) float64 {
		t.Helper()
		count := 0
		for i := range sampleHashes {
			h := sampleHash(i)
			from, to := before.names[before.bal.owner(h)], after.names[after.bal.owner(h)]
			if from == to {
				continue
			}
			if from != changed && to != changed {
				t.Fatalf("hash %#x moved from %s to %s, but only %s changed", h, from, to, changed)
			}
			count++
		}
		return float64(count) / sampleHashes
	}
	withinIdeal := func(what string, got, ideal float64) {
		t.Helper()
		if got < ideal/limit || got > ideal*limit {
			t.Errorf("%s moved %.5f of the keys, want within 5%% of the ideal %.5f", what, got, ideal)
		}
	}
	for _, gone := range []string{names[0], names[37], names[n-1]} {
		smaller := mustNew(t, Config{}, Names(slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == gone })...)...)
		withinIdeal("removing "+gone, moved(r, smaller, gone), 1.0/n)
	}
	for _, joined := range []string{"conductor-new.example.org", "z", "conductor-050.example.org.2"} {
		bigger := mustNew(t, Config{}, Names(append(slices.Clone(names), joined)...)...)
		withinIdeal("adding "+joined, moved(r, bigger, joined), 1.0/(n+1))
	}
	// Real keys through Get and Moves: the same property end to end.
	keys := testKeys(20_000, 41)
	bigger := mustNew(t, Config{}, Names(append(slices.Clone(names), "conductor-new.example.org")...)...)
	for _, m := range Moves(r, bigger, keys) {
		if m.To != "conductor-new.example.org" {
			t.Fatalf("adding conductor-new.example.org moved %s from %s to %s", m.Key, m.From, m.To)
		}
	}
}
