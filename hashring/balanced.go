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

// ownerBits is the number of low position bits a Balanced ring ignores;
// a point is stored as its position with those bits replaced by its
// member's index, which is why a Balanced ring holds at most
// 1<<ownerBits members.
const (
	ownerBits = 16
	ownerMask = 1<<ownerBits - 1
)

// splitMix64 is SplitMix64's output function: a bijection on uint64 that
// turns consecutive inputs into well-spread outputs.
func splitMix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// balancedPosition returns the position of a member's v-th point: the
// SplitMix64 stream seeded with XXH64(name), i.e.
// splitMix64(XXH64(name) + (v+1)·golden), truncated to its top 48 bits.
func balancedPosition(seed uint64, v int) uint64 {
	return splitMix64(seed+uint64(v+1)*golden) &^ ownerMask
}

// balancedRing holds the points sorted, each packed as its 48-bit
// position over its member index (so equal positions order by member
// name), and a bucket index over the top bits: idx[b] is the first point
// whose top bits are at least b. A lookup reads one index entry and scans
// a few consecutive points.
type balancedRing struct {
	pts   []uint64
	idx   []uint32 // len 1<<k + 1
	shift uint     // 64 - k
}

// buildBalanced places the points and sorts them in linear time: a
// two-pass LSD radix sort on the top 22 bits (each pass streams the points
// into 2,048 sequential runs, which caches well), then an insertion sort
// that only has to order the rare points sharing those 22 bits.
func buildBalanced(names []string, weights []int) balancedRing {
	const digitBits, lowShift, highShift = 11, 64 - 2*11, 64 - 11
	total := 0
	for _, w := range weights {
		total += w * balancedPointsPerWeight
	}
	pts := make([]uint64, 0, total)
	var lowCount, highCount [1 << digitBits]uint32
	for m, name := range names {
		seed := xxhash.Sum64String(name)
		for v := range weights[m] * balancedPointsPerWeight {
			p := balancedPosition(seed, v) | uint64(m)
			pts = append(pts, p)
			lowCount[(p>>lowShift)&(1<<digitBits-1)]++
			highCount[p>>highShift]++
		}
	}
	tmp := make([]uint64, total)
	radixPass(tmp, pts, &lowCount, lowShift, 1<<digitBits-1)
	radixPass(pts, tmp, &highCount, highShift, 1<<digitBits-1)
	for i := 1; i < len(pts); i++ {
		for j := i; j > 0 && pts[j] < pts[j-1]; j-- {
			pts[j], pts[j-1] = pts[j-1], pts[j]
		}
	}
	// The index only speeds lookups up, so its size is free. Small rings
	// get about half a point per bucket (an index of at most 256 KiB, so a
	// lookup mostly reads one index entry and one point); large rings
	// about eight, so the index (half a byte per point) stays in cache
	// and a bucket's points span one or two cache lines.
	k := bits.Len(uint(total - 1))
	if total <= 1<<15 {
		k++
	} else {
		k -= 3
	}
	k = max(k, 1)
	shift := uint(64 - k)
	idx := make([]uint32, 1<<k+1)
	for _, p := range pts {
		idx[(p>>shift)+1]++
	}
	for b := 1; b < len(idx); b++ {
		idx[b] += idx[b-1]
	}
	return balancedRing{pts: pts, idx: idx, shift: shift}
}

// radixPass stably moves src into dst ordered by the digit
// (p>>shift)&mask, given the digit's histogram.
func radixPass(dst, src []uint64, count *[1 << 11]uint32, shift uint, mask uint64) {
	var next [1 << 11]uint32
	sum := uint32(0)
	for d, c := range count {
		next[d] = sum
		sum += c
	}
	for _, p := range src {
		d := (p >> shift) & mask
		dst[next[d]] = p
		next[d]++
	}
}

// first returns the index of the first point after XXH64(key).
func (r *balancedRing) first(key string) int {
	return r.firstAfter(xxhash.Sum64String(key))
}

// firstAfter returns the index of the first point whose 48-bit position
// is greater than x's top 48 bits, wrapping to 0 past the end. Among
// points at the same position the member that sorts first by name wins,
// whatever else is on the ring.
func (r *balancedRing) firstAfter(x uint64) int {
	x |= ownerMask
	b := x >> r.shift
	i, end := r.idx[b], r.idx[b+1]
	for i < end && r.pts[i] <= x {
		i++
	}
	if int(i) == len(r.pts) {
		return 0
	}
	return int(i)
}

// ownerAt returns the member index of point i.
func (r *balancedRing) ownerAt(i int) uint32 { return uint32(r.pts[i] & ownerMask) }
