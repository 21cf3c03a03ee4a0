package hashring

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"
)

// ironicPoint is one partition of a tooz ring: the md5 digest read as a
// 128-bit big-endian integer (tooz's int(hexdigest, 16)) and its member.
type ironicPoint struct {
	hi, lo uint64
	owner  uint32
}

// ironicRing is tooz's HashRing: points sorted by value, looked up with
// bisect_right and wrap-around.
type ironicRing struct {
	pts   []ironicPoint
	idx   []uint32 // idx[b] is the first point whose top bits are >= b
	shift uint
}

// buildIronic places partitions×weight points per member the way tooz's
// add_node does: one running md5 seeded with the name, updated with the
// name again before each point, each point being the running digest. So
// the i-th point (from 0) is md5(name repeated i+2 times).
func buildIronic(names []string, weights []int, partitions int) ironicRing {
	total := 0
	for _, w := range weights {
		total += w * partitions
	}
	pts := make([]ironicPoint, 0, total)
	var sum [md5.Size]byte
	for m, name := range names {
		h := md5.New()
		h.Write([]byte(name))
		for range weights[m] * partitions {
			h.Write([]byte(name))
			d := h.Sum(sum[:0])
			pts = append(pts, ironicPoint{
				hi:    binary.BigEndian.Uint64(d[:8]),
				lo:    binary.BigEndian.Uint64(d[8:]),
				owner: uint32(m),
			})
		}
	}
	// tooz keeps points in a dict, so when two members produce the same
	// point only one keeps it. That happens when one name is a repetition
	// of another ("ab" and "abab": the running hashes meet), and which
	// member wins in tooz depends on Python's per-process set order, so
	// Ironic itself is not deterministic there. Here both points stay,
	// ordered by member name: the first owns the keys (as if it had won
	// the dict), and the second comes next in GetN, so the order of
	// preference stays independent of which members are present.
	slices.SortFunc(pts, func(a, b ironicPoint) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	// The bucket index only speeds the search up; the answer is the
	// same as bisect_right over all points.
	k := max(bits.Len(uint(len(pts)-1)), 1)
	shift := uint(64 - k)
	idx := make([]uint32, 1<<k+1)
	for _, p := range pts {
		idx[(p.hi>>shift)+1]++
	}
	for b := 1; b < len(idx); b++ {
		idx[b] += idx[b-1]
	}
	return ironicRing{pts: pts, idx: idx, shift: shift}
}

// keyBytes views a string's bytes without copying. The hash functions
// only read their input, so the string's immutability is preserved; the
// copy []byte(key) would allocate for keys longer than 32 bytes, which
// includes every UUID.
func keyBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// first returns the index of the first point strictly greater than the
// md5 of key (bisect_right), wrapping to 0 past the end.
func (r *ironicRing) first(key string) int {
	d := md5.Sum(keyBytes(key))
	return r.firstAfter(binary.BigEndian.Uint64(d[:8]), binary.BigEndian.Uint64(d[8:]))
}

// firstAfter returns the index of the first point strictly greater than
// the 128-bit value hi:lo, wrapping to 0 past the end.
func (r *ironicRing) firstAfter(hi, lo uint64) int {
	pts := r.pts
	b := hi >> r.shift
	i, end := r.idx[b], r.idx[b+1]
	for i < end && (pts[i].hi < hi || (pts[i].hi == hi && pts[i].lo <= lo)) {
		i++
	}
	if int(i) == len(pts) {
		return 0
	}
	return int(i)
}
