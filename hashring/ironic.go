package hashring

import (
	"cmp"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/binary"
	"hash"
	"math/bits"
	"slices"
	"unsafe"
)

// ironicHash identifies one of the hashlib functions Ironic's
// [DEFAULT]hash_ring_algorithm may name.
type ironicHash uint8

const (
	hashMD5 ironicHash = iota
	hashSHA1
	hashSHA224
	hashSHA256
	hashSHA384
	hashSHA512
	hashSHA512_224
	hashSHA512_256
	hashSHA3_224
	hashSHA3_256
	hashSHA3_384
	hashSHA3_512
)

// ironicHashNames lists the hashlib names, as written in ironic.conf, in
// ironicHash order.
func ironicHashNames() []string {
	return []string{"md5", "sha1", "sha224", "sha256", "sha384", "sha512",
		"sha512_224", "sha512_256", "sha3_224", "sha3_256", "sha3_384", "sha3_512"}
}

// parseIronicHash returns the hash a hashlib name selects.
func parseIronicHash(name string) (ironicHash, bool) {
	for i, n := range ironicHashNames() {
		if n == name {
			return ironicHash(i), true
		}
	}
	return 0, false
}

// IronicHashAlgorithms returns the hash_ring_algorithm names an
// IronicCompatible ring accepts, sorted.
func IronicHashAlgorithms() []string {
	names := ironicHashNames()
	slices.Sort(names)
	return names
}

func (h ironicHash) new() hash.Hash {
	switch h {
	case hashSHA1:
		return sha1.New()
	case hashSHA224:
		return sha256.New224()
	case hashSHA256:
		return sha256.New()
	case hashSHA384:
		return sha512.New384()
	case hashSHA512:
		return sha512.New()
	case hashSHA512_224:
		return sha512.New512_224()
	case hashSHA512_256:
		return sha512.New512_256()
	case hashSHA3_224:
		return sha3.New224()
	case hashSHA3_256:
		return sha3.New256()
	case hashSHA3_384:
		return sha3.New384()
	case hashSHA3_512:
		return sha3.New512()
	default:
		return md5.New()
	}
}

// sum hashes data into out and returns the digest length. It allocates
// nothing: every case is a fixed-size array sum.
func (h ironicHash) sum(out *[64]byte, data []byte) int {
	switch h {
	case hashSHA1:
		d := sha1.Sum(data)
		return copy(out[:], d[:])
	case hashSHA224:
		d := sha256.Sum224(data)
		return copy(out[:], d[:])
	case hashSHA256:
		d := sha256.Sum256(data)
		return copy(out[:], d[:])
	case hashSHA384:
		d := sha512.Sum384(data)
		return copy(out[:], d[:])
	case hashSHA512:
		d := sha512.Sum512(data)
		return copy(out[:], d[:])
	case hashSHA512_224:
		d := sha512.Sum512_224(data)
		return copy(out[:], d[:])
	case hashSHA512_256:
		d := sha512.Sum512_256(data)
		return copy(out[:], d[:])
	case hashSHA3_224:
		d := sha3.Sum224(data)
		return copy(out[:], d[:])
	case hashSHA3_256:
		d := sha3.Sum256(data)
		return copy(out[:], d[:])
	case hashSHA3_384:
		d := sha3.Sum384(data)
		return copy(out[:], d[:])
	case hashSHA3_512:
		d := sha3.Sum512(data)
		return copy(out[:], d[:])
	default:
		d := md5.Sum(data)
		return copy(out[:], d[:])
	}
}

// ironicPoint is one partition of a tooz ring: the digest read as a
// big-endian integer (tooz's int(hexdigest, 16)), held as its first 128
// bits, and its member. Digests longer than 128 bits keep the rest in
// ironicRing.tails, consulted only when the first 128 bits tie.
type ironicPoint struct {
	hi, lo uint64
	owner  uint32
	tail   uint32 // index into ironicRing.tails
}

// ironicRing is tooz's HashRing: points sorted by value, looked up with
// bisect_right and wrap-around.
type ironicRing struct {
	hash  ironicHash
	pts   []ironicPoint
	tails []string // digest bytes past the first 16, per point; nil for md5
	idx   []uint32 // idx[b] is the first point whose top bits are >= b
	shift uint
}

// buildIronic places partitions×weight points per member the way tooz's
// add_node does: one running hash seeded with the name, updated with the
// name again before each point, each point being the running digest. So
// the i-th point (from 0) is H(name repeated i+2 times).
func buildIronic(h ironicHash, names []string, weights []int, partitions int) ironicRing {
	total := 0
	for _, w := range weights {
		total += w * partitions
	}
	r := ironicRing{hash: h, pts: make([]ironicPoint, 0, total)}
	var buf [64]byte
	for m, name := range names {
		nameBytes := []byte(name)
		running := h.new()
		running.Write(nameBytes)
		for range weights[m] * partitions {
			running.Write(nameBytes)
			d := running.Sum(buf[:0])
			p := ironicPoint{
				hi:    binary.BigEndian.Uint64(d[:8]),
				lo:    binary.BigEndian.Uint64(d[8:16]),
				owner: uint32(m),
			}
			if len(d) > 16 {
				p.tail = uint32(len(r.tails))
				r.tails = append(r.tails, string(d[16:]))
			}
			r.pts = append(r.pts, p)
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
	slices.SortFunc(r.pts, func(a, b ironicPoint) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		if r.tails != nil {
			if c := cmp.Compare(r.tails[a.tail], r.tails[b.tail]); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.owner, b.owner)
	})
	// The bucket index only speeds the search up; the answer is the
	// same as bisect_right over all points.
	k := max(bits.Len(uint(len(r.pts)-1)), 1)
	r.shift = uint(64 - k)
	r.idx = make([]uint32, 1<<k+1)
	for _, p := range r.pts {
		r.idx[(p.hi>>r.shift)+1]++
	}
	for b := 1; b < len(r.idx); b++ {
		r.idx[b] += r.idx[b-1]
	}
	return r
}

// keyBytes views a string's bytes without copying. The hash functions
// only read their input, so the string's immutability is preserved; the
// copy []byte(key) would allocate for keys longer than 32 bytes, which
// includes every UUID.
func keyBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// first returns the index of the first point strictly greater than the
// hash of key (bisect_right), wrapping to 0 past the end.
func (r *ironicRing) first(key string) int {
	var d [64]byte
	n := r.hash.sum(&d, keyBytes(key))
	return r.firstAfter(binary.BigEndian.Uint64(d[:8]), binary.BigEndian.Uint64(d[8:16]), d[16:n])
}

// firstAfter returns the index of the first point strictly greater than
// the value whose first 128 bits are hi:lo and whose remaining bytes are
// tail, wrapping to 0 past the end.
func (r *ironicRing) firstAfter(hi, lo uint64, tail []byte) int {
	pts := r.pts
	b := hi >> r.shift
	i, end := r.idx[b], r.idx[b+1]
	for i < end {
		p := &pts[i]
		if p.hi > hi || (p.hi == hi && (p.lo > lo || (p.lo == lo && r.tails != nil && r.tails[p.tail] > string(tail)))) {
			break
		}
		i++
	}
	if int(i) == len(pts) {
		return 0
	}
	return int(i)
}
