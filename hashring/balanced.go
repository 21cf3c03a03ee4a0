package hashring

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// balancedPointsPerWeight is the number of virtual points a Balanced ring
// gives a member per unit of weight. It fixes the balance: a member's
// share of the key space has a relative standard deviation of about
// 1/sqrt(512) = 4.4%. Changing it changes every key's owner, so it is
// part of the algorithm's definition, not a tunable.
const balancedPointsPerWeight = 512

// golden is 2^64 divided by the golden ratio, SplitMix64's increment.
const golden = 0x9e3779b97f4a7c15

// splitMix64 is SplitMix64's output function: a bijection on uint64 that
// turns consecutive inputs into well-spread outputs.
func splitMix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// balancedPoint is one virtual point: its position on the 64-bit circle
// and the index of its member.
type balancedPoint struct {
	pos   uint64
	owner uint32
}

// balancedRing holds the points sorted by (position, member index) and a
// bucket index over the top bits of the position: idx[b] is the first
// point whose top bits are at least b, so a lookup reads one index entry
// and, on average, less than one point before it finds its owner.
type balancedRing struct {
	pts   []balancedPoint
	idx   []uint32 // len 1<<k + 1
	shift uint     // 64 - k
}

// balancedPosition returns the position of a member's v-th point: the
// SplitMix64 stream seeded with XXH64(name), i.e.
// splitMix64(XXH64(name) + (v+1)·golden).
func balancedPosition(seed uint64, v int) uint64 {
	return splitMix64(seed + uint64(v+1)*golden)
}

// buildBalanced places the points and sorts them with one counting pass
// over the bucket index followed by insertion sort inside each bucket
// (about one point per bucket), which is linear in the number of points.
func buildBalanced(names []string, weights []int) balancedRing {
	total := 0
	for _, w := range weights {
		total += w * balancedPointsPerWeight
	}
	k := bits.Len(uint(total - 1))
	k = max(k, 1)
	shift := uint(64 - k)
	idx := make([]uint32, 1<<k+1)
	raw := make([]balancedPoint, 0, total)
	for m, name := range names {
		seed := xxhash.Sum64String(name)
		for v := range weights[m] * balancedPointsPerWeight {
			p := balancedPosition(seed, v)
			raw = append(raw, balancedPoint{pos: p, owner: uint32(m)})
			idx[(p>>shift)+1]++
		}
	}
	for b := 1; b < len(idx); b++ {
		idx[b] += idx[b-1]
	}
	cursor := make([]uint32, 1<<k)
	copy(cursor, idx)
	pts := make([]balancedPoint, total)
	for _, p := range raw {
		b := p.pos >> shift
		pts[cursor[b]] = p
		cursor[b]++
	}
	for b := 0; b < 1<<k; b++ {
		lo, hi := int(idx[b]), int(idx[b+1])
		for i := lo + 1; i < hi; i++ {
			for j := i; j > lo && less(pts[j], pts[j-1]); j-- {
				pts[j], pts[j-1] = pts[j-1], pts[j]
			}
		}
	}
	return balancedRing{pts: pts, idx: idx, shift: shift}
}

func less(a, b balancedPoint) bool {
	return a.pos < b.pos || (a.pos == b.pos && a.owner < b.owner)
}

// first returns the index of the first point strictly after XXH64(key),
// wrapping to 0 past the end. Points at the same position are ordered by
// member name, so the first of them wins, whatever else is on the ring.
func (r *balancedRing) first(key string) int {
	return r.firstAfter(xxhash.Sum64String(key))
}

// firstAfter returns the index of the first point strictly after
// position x, wrapping to 0 past the end.
func (r *balancedRing) firstAfter(x uint64) int {
	b := x >> r.shift
	i, end := r.idx[b], r.idx[b+1]
	for i < end && r.pts[i].pos <= x {
		i++
	}
	if int(i) == len(r.pts) {
		return 0
	}
	return int(i)
}
