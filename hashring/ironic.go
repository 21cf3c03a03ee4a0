package hashring

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
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
	pts []ironicPoint
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
	// tooz keeps points in a dict, so two members hashing to the same
	// point keep one entry; which one depends on Python's set order. md5
	// collisions between host names do not happen in practice; the
	// deterministic choice here keeps the member that sorts first.
	slices.SortFunc(pts, func(a, b ironicPoint) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	pts = slices.CompactFunc(pts, func(a, b ironicPoint) bool { return a.hi == b.hi && a.lo == b.lo })
	return ironicRing{pts: pts}
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
	i, j := 0, len(pts)
	for i < j {
		h := int(uint(i+j) >> 1)
		p := &pts[h]
		if p.hi < hi || (p.hi == hi && p.lo <= lo) {
			i = h + 1
		} else {
			j = h
		}
	}
	if i == len(pts) {
		return 0
	}
	return i
}
