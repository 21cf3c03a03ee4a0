package hashring

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// balancedPointsPerWeight is the number of virtual points a Balanced ring
// gives a member per unit of weight. Together with the score factor it
// fixes the balance (a member's share has a relative standard deviation
// of about 1.3%); changing it changes keys' owners, so it is part of the
// algorithm's definition, not a tunable.
const balancedPointsPerWeight = 1024

// factorBits and the top two bits of a member's per-key hash make the
// score factor: 2^e·(1 + f/2^factorBits) for e in 0..3, a staircase
// approximation of a log-uniform factor between 1 and 16. Eight bits keep
// a score (at most 2^(32+factorBits+4)) small enough to pack with its
// member into one comparable uint64.
const factorBits = 8

// golden is 2^64 divided by the golden ratio, SplitMix64's increment.
const golden = 0x9e3779b97f4a7c15

// ownerBits is the number of bits a stored point spends on its member's
// index, which is why a Balanced ring holds at most 1<<ownerBits members.
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

// balancedPosition returns the 32-bit position of a member's v-th point:
// the top half of the SplitMix64 stream seeded with XXH64(name), i.e. of
// splitMix64(XXH64(name) + (v+1)·golden). Thirty-two bits are plenty for
// placement (a ring of a million points has about a hundred equal
// positions, which rank by member name like any other) and leave room to
// store the member beside the position.
func balancedPosition(seed uint64, v int) uint32 {
	return uint32(splitMix64(seed+uint64(v+1)*golden) >> 32)
}

// balancedRing holds the points sorted, each packed as its 32-bit
// position over its 16-bit member index (so equal positions order by
// member name), a bucket index over the top bits (idx[b] is the first
// point whose top bits are at least b), and each member's seed,
// XXH64(name), which its per-key score factor mixes with the key's hash.
// A lookup reads one index entry and walks a few consecutive points,
// usually within one cache line.
type balancedRing struct {
	pts   []uint64
	idx   []uint32 // len 1<<k + 1
	seeds []uint64 // seeds[m] = XXH64(names[m])
	shift uint     // 48 - k: point >> shift is its bucket
}

// buildBalanced places the points and sorts them in linear time: a
// two-pass LSD radix sort on the top 22 bits of the position (each pass
// streams the points into 2,048 sequential runs, which caches well), then
// an insertion sort that only has to order the rare points sharing those
// 22 bits. Points are sorted as position<<16 | member, so equal positions
// order by member name.
func buildBalanced(names []string, weights []int) balancedRing {
	const digitBits, lowShift, highShift = 11, 48 - 2*11, 48 - 11
	total := 0
	for _, w := range weights {
		total += w * balancedPointsPerWeight
	}
	pts := make([]uint64, 0, total)
	seeds := make([]uint64, len(names))
	var lowCount, highCount [1 << digitBits]uint32
	for m, name := range names {
		seed := xxhash.Sum64String(name)
		seeds[m] = seed
		for v := range weights[m] * balancedPointsPerWeight {
			p := uint64(balancedPosition(seed, v))<<ownerBits | uint64(m)
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
	shift := uint(48 - k)
	idx := make([]uint32, 1<<k+1)
	for _, p := range pts {
		idx[(p>>shift)+1]++
	}
	for b := 1; b < len(idx); b++ {
		idx[b] += idx[b-1]
	}
	return balancedRing{pts: pts, idx: idx, seeds: seeds, shift: shift}
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

// seek returns the index of the first point whose position is greater
// than x, wrapping to 0 past the end. Among points at the same position
// the member that sorts first by name comes first, whatever else is on
// the ring.
func (r *balancedRing) seek(x uint32) int {
	key := uint64(x)<<ownerBits | ownerMask
	b := key >> r.shift
	i, end := r.idx[b], r.idx[b+1]
	for i < end && r.pts[i] <= key {
		i++
	}
	if int(i) == len(r.pts) {
		return 0
	}
	return int(i)
}

// balancedKey is member m's score for a key, packed over m so that
// comparing keys compares (score, member name). The score is the
// clockwise distance d from the key to m's first point, times a factor
// between 1 and 16 drawn from splitMix64(keyHash XOR seed); the lowest
// key owns the key.
func balancedKey(keyHash, seed, d uint64, m uint32) uint64 {
	u := splitMix64(keyHash ^ seed)
	score := d * (1<<factorBits | (u>>(62-factorBits))&(1<<factorBits-1)) << (u >> 62)
	return score<<ownerBits | uint64(m)
}

// keyAt returns the packed score of the member of point i, with the
// point's distance from x, for the key hash h.
func (r *balancedRing) keyAt(h uint64, x uint32, i int) (key, d uint64) {
	p := r.pts[i]
	d = pointDistance(p, x)
	return balancedKey(h, r.seeds[p&ownerMask], d, uint32(p&ownerMask)), d
}

// pointDistance returns how far clockwise the packed point p lies from
// position x: 1 to 2^32, a point at x itself being a full turn away.
func pointDistance(p uint64, x uint32) uint64 { return uint64(uint32(p>>ownerBits)-x-1) + 1 }

// owner returns the member with the lowest score for the key hash h.
// Points are visited in order of distance and a score is at least
// distance<<factorBits, so the walk stops once a point is too far away
// to win; a member's later points score higher than its first, so the
// walk needs no memory of the members it has seen. Points are taken four
// at a time: their scores do not depend on each other, so the processor
// computes them in parallel, and four usually suffice.
func (r *balancedRing) owner(h uint64) uint32 {
	x := uint32(h >> 32)
	n := len(r.pts) // at least balancedPointsPerWeight, so >= 4
	i := r.seek(x)
	best := ^uint64(0)
	for walked := 0; walked < n; walked += 4 {
		i1, i2, i3 := i+1, i+2, i+3
		if i3 >= n {
			i1, i2, i3 = i1%n, i2%n, i3%n
		}
		p0, p1, p2, p3 := r.pts[i], r.pts[i1], r.pts[i2], r.pts[i3]
		d3 := pointDistance(p3, x)
		best = min(best,
			balancedKey(h, r.seeds[p0&ownerMask], pointDistance(p0, x), uint32(p0&ownerMask)),
			balancedKey(h, r.seeds[p1&ownerMask], pointDistance(p1, x), uint32(p1&ownerMask)),
			balancedKey(h, r.seeds[p2&ownerMask], pointDistance(p2, x), uint32(p2&ownerMask)),
			balancedKey(h, r.seeds[p3&ownerMask], d3, uint32(p3&ownerMask)))
		if (d3<<factorBits)<<ownerBits >= best {
			break
		}
		if i = i3 + 1; i == n {
			i = 0
		}
	}
	return uint32(best & ownerMask)
}

// appendRanked appends to dst the names of up to want members in
// increasing score for the key hash h, skipping the members set in seen
// (which it marks as it goes). A candidate is final once the walk has
// reached a distance whose lowest possible key exceeds it.
func (r *balancedRing) appendRanked(dst []string, names []string, h uint64, want int, seen []uint64) []string {
	var buf [32]uint64 // packed keys of members seen but not yet final
	pending := buf[:0]
	emit := func(bound uint64) {
		for want > 0 && len(pending) > 0 {
			j := 0
			for k := 1; k < len(pending); k++ {
				if pending[k] < pending[j] {
					j = k
				}
			}
			if pending[j] >= bound {
				return
			}
			dst = append(dst, names[pending[j]&ownerMask])
			want--
			pending[j] = pending[len(pending)-1]
			pending = pending[:len(pending)-1]
		}
	}
	x := uint32(h >> 32)
	i := r.seek(x)
	for range len(r.pts) {
		key, d := r.keyAt(h, x, i)
		if emit((d << factorBits) << ownerBits); want == 0 {
			return dst
		}
		if m := uint32(key & ownerMask); seen[m/64]&(1<<(m%64)) == 0 {
			seen[m/64] |= 1 << (m % 64)
			pending = append(pending, key)
		}
		if i++; i == len(r.pts) {
			i = 0
		}
	}
	emit(^uint64(0))
	return dst
}
