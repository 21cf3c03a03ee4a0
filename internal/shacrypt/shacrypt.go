// Package shacrypt hashes passwords with the SHA-256 and SHA-512 crypt
// schemes of glibc's crypt(3) ("$5$" and "$6$", Ulrich Drepper's
// specification), the hashes /etc/shadow holds and Ironic sends the
// ramdisk as a rescue password ([conductor]rescue_password_hash_algorithm,
// hashed with Python's crypt.mksalt and crypt.crypt).
//
// Hash makes a new hash with a random 16-character salt and the default
// 5000 rounds, as crypt.mksalt does; HashWithSalt is the deterministic
// form for tests and known vectors, and accepts "rounds=N$salt".
package shacrypt

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Algorithm is a crypt scheme, named as Ironic's
// rescue_password_hash_algorithm names it.
type Algorithm string

// The schemes.
const (
	SHA256 Algorithm = "sha256" // "$5$"
	SHA512 Algorithm = "sha512" // "$6$"
)

// Algorithms are the accepted values, in Ironic's order.
func Algorithms() []Algorithm { return []Algorithm{SHA256, SHA512} }

// The limits of the specification.
const (
	DefaultRounds = 5000
	MinRounds     = 1000
	MaxRounds     = 999999999
	maxSaltLen    = 16
)

// saltAlphabet is crypt's base-64 alphabet, which salts are drawn from.
const saltAlphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// ErrAlgorithm is returned for a scheme that is neither SHA256 nor
// SHA512.
var ErrAlgorithm = errors.New("shacrypt: unknown algorithm")

// scheme is what differs between the two schemes: the prefix, the hash,
// the order of the final digest's bytes in the output and its last
// group (byte indexes, -1 for a zero byte) with its length in characters.
type scheme struct {
	prefix string
	hash   func() hash.Hash
	order  [][3]int
	tail   [3]int
	tailN  int
}

func (a Algorithm) scheme() (scheme, error) {
	switch a {
	case SHA256:
		return scheme{"$5$", sha256.New, sha256Order, [3]int{-1, 31, 30}, 3}, nil
	case SHA512:
		return scheme{"$6$", sha512.New, sha512Order, [3]int{-1, -1, 63}, 2}, nil
	}
	return scheme{}, fmt.Errorf("%w %q: want one of %v", ErrAlgorithm, string(a), Algorithms())
}

// Hash returns the crypt hash of password with a, a random salt of 16
// characters and the default rounds, e.g. "$5$<salt>$<43 characters>".
func Hash(a Algorithm, password string) (string, error) {
	var b [maxSaltLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("shacrypt: salt: %w", err)
	}
	for i := range b {
		b[i] = saltAlphabet[int(b[i])%len(saltAlphabet)]
	}
	return HashWithSalt(a, password, string(b[:]))
}

// HashWithSalt returns the crypt hash of password with a and salt: the
// salt's characters up to the first '$' (at most 16 are used), optionally
// after "rounds=N$" (N from MinRounds to MaxRounds: libxcrypt, which
// Debian's crypt(3) is, refuses others, where glibc clamped them).
// A salt may start with the scheme's own prefix ("$5$..."), as crypt(3)
// takes it.
func HashWithSalt(a Algorithm, password, salt string) (string, error) {
	sc, err := a.scheme()
	if err != nil {
		return "", err
	}
	salt = strings.TrimPrefix(salt, sc.prefix)
	rounds, custom := DefaultRounds, false
	if r, ok := strings.CutPrefix(salt, "rounds="); ok {
		num, rest, found := strings.Cut(r, "$")
		n, perr := strconv.Atoi(num)
		if !found || perr != nil || n < MinRounds || n > MaxRounds {
			return "", fmt.Errorf("shacrypt: salt %q: want rounds=<%d to %d>$<salt>", salt, MinRounds, MaxRounds)
		}
		rounds, custom = n, true
		salt = rest
	}
	if i := strings.IndexByte(salt, '$'); i >= 0 {
		salt = salt[:i]
	}
	if len(salt) > maxSaltLen {
		salt = salt[:maxSaltLen]
	}
	sum := digest(sc.hash, []byte(password), []byte(salt), rounds)
	var out strings.Builder
	out.WriteString(sc.prefix)
	if custom {
		fmt.Fprintf(&out, "rounds=%d$", rounds)
	}
	out.WriteString(salt)
	out.WriteByte('$')
	for _, o := range sc.order {
		encode24(&out, sum[o[0]], sum[o[1]], sum[o[2]], 4)
	}
	var b [3]byte
	for i, idx := range sc.tail {
		if idx >= 0 {
			b[i] = sum[idx]
		}
	}
	encode24(&out, b[0], b[1], b[2], sc.tailN)
	return out.String(), nil
}

// digest runs the specification's steps 1 to 21.
func digest(newHash func() hash.Hash, pw, salt []byte, rounds int) []byte {
	h := newHash()
	size := h.Size()
	// B = H(password salt password).
	h.Write(pw)
	h.Write(salt)
	h.Write(pw)
	b := h.Sum(nil)
	// A = H(password salt, B for each full block of the password's
	// length and its remainder, then B or the password for each bit of
	// the length).
	h.Reset()
	h.Write(pw)
	h.Write(salt)
	n := len(pw)
	for ; n > size; n -= size {
		h.Write(b)
	}
	h.Write(b[:n])
	for n = len(pw); n > 0; n >>= 1 {
		if n&1 != 0 {
			h.Write(b)
		} else {
			h.Write(pw)
		}
	}
	a := h.Sum(nil)
	// P: H(the password, as many times as its length) stretched to the
	// password's length.
	h.Reset()
	for range len(pw) {
		h.Write(pw)
	}
	p := stretch(h.Sum(nil), len(pw))
	// S: H(the salt, 16 + A[0] times) stretched to the salt's length.
	h.Reset()
	for range 16 + int(a[0]) {
		h.Write(salt)
	}
	s := stretch(h.Sum(nil), len(salt))
	c := a
	for i := range rounds {
		h.Reset()
		if i&1 != 0 {
			h.Write(p)
		} else {
			h.Write(c)
		}
		if i%3 != 0 {
			h.Write(s)
		}
		if i%7 != 0 {
			h.Write(p)
		}
		if i&1 != 0 {
			h.Write(c)
		} else {
			h.Write(p)
		}
		c = h.Sum(c[:0])
	}
	return c
}

// stretch repeats d to n bytes.
func stretch(d []byte, n int) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, d[:min(len(d), n-len(out))]...)
	}
	return out
}

// encode24 writes n characters of the 24-bit group b2 b1 b0, least
// significant six bits first.
func encode24(out *strings.Builder, b2, b1, b0 byte, n int) {
	w := uint(b2)<<16 | uint(b1)<<8 | uint(b0)
	for range n {
		out.WriteByte(saltAlphabet[w&0x3f])
		w >>= 6
	}
}

// The byte triples of the final digest in output order (the
// specification's step 22).
var (
	sha256Order = [][3]int{
		{0, 10, 20}, {21, 1, 11}, {12, 22, 2}, {3, 13, 23}, {24, 4, 14},
		{15, 25, 5}, {6, 16, 26}, {27, 7, 17}, {18, 28, 8}, {9, 19, 29},
	}
	sha512Order = [][3]int{
		{0, 21, 42}, {22, 43, 1}, {44, 2, 23}, {3, 24, 45}, {25, 46, 4},
		{47, 5, 26}, {6, 27, 48}, {28, 49, 7}, {50, 8, 29}, {9, 30, 51},
		{31, 52, 10}, {53, 11, 32}, {12, 33, 54}, {34, 55, 13}, {56, 14, 35},
		{15, 36, 57}, {37, 58, 16}, {59, 17, 38}, {18, 39, 60}, {40, 61, 19},
		{62, 20, 41},
	}
)
