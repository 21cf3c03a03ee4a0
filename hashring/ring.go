package hashring

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// Algorithm selects how a Ring places members and keys.
type Algorithm uint8

const (
	// Balanced is Anvil's default: 1,024 virtual points per unit of
	// weight, placed with XXH64 and the SplitMix64 finaliser, keys hashed
	// with XXH64; a key goes to the member with the lowest score, its
	// distance to the member's nearest point times a per-key factor, found
	// through a bucket index and a short walk. See the package
	// documentation for why it was chosen and what it measures.
	Balanced Algorithm = iota
	// IronicCompatible reproduces tooz's HashRing as Ironic configures
	// it: md5, 2^PartitionExponent points per member per unit of weight
	// from cumulative hashing of the member name, bisect_right lookup
	// with wrap-around. A ring built with it agrees with an Ironic
	// conductor on every key's owner.
	IronicCompatible
)

// String returns "balanced" or "ironic-compatible".
func (a Algorithm) String() string {
	switch a {
	case Balanced:
		return "balanced"
	case IronicCompatible:
		return "ironic-compatible"
	default:
		return "algorithm(" + strconv.Itoa(int(a)) + ")"
	}
}

// Limits on ring input. They keep a mistaken weight from allocating
// gigabytes; real fleets stay far below them.
const (
	// MaxWeight is the largest accepted member weight.
	MaxWeight = 1000
	// MaxMembers is the largest number of members a ring may hold.
	MaxMembers = 1 << ownerBits
	// MaxPoints is the largest number of points a ring may hold.
	MaxPoints = 1 << 26
	// DefaultPartitionExponent is Ironic's [DEFAULT]hash_partition_exponent.
	DefaultPartitionExponent = 5
	// MaxPartitionExponent is the largest accepted PartitionExponent.
	MaxPartitionExponent = 16
)

// Config selects the algorithm and its parameters. The zero value is the
// Balanced algorithm with its defaults.
type Config struct {
	// Algorithm selects the placement algorithm. The zero value is
	// Balanced.
	Algorithm Algorithm
	// HashAlgorithm is Ironic's hash_ring_algorithm, the hashlib name of
	// the hash an IronicCompatible ring uses for points and keys: "md5"
	// (Ironic's default, also selected by ""), "sha1", "sha224", "sha256",
	// "sha384", "sha512", "sha512_224", "sha512_256", "sha3_224",
	// "sha3_256", "sha3_384" or "sha3_512" (see IronicHashAlgorithms).
	// Ironic's documentation asks FIPS deployments to move off md5; every
	// service must use the same one. Balanced rings ignore it.
	HashAlgorithm string
	// PartitionExponent is Ironic's hash_partition_exponent: with
	// IronicCompatible each member gets 2^PartitionExponent points per
	// unit of weight. Zero selects DefaultPartitionExponent (5, as in
	// Ironic); the accepted range is 1 to MaxPartitionExponent. Balanced
	// rings ignore it.
	PartitionExponent int
}

func (c Config) normalized() (Config, error) {
	switch c.Algorithm {
	case Balanced, IronicCompatible:
	default:
		return c, &ConfigError{Field: "Algorithm", Value: c.Algorithm.String(), Reason: "want Balanced or IronicCompatible"}
	}
	if c.HashAlgorithm == "" {
		c.HashAlgorithm = "md5"
	}
	if _, ok := parseIronicHash(c.HashAlgorithm); !ok {
		return c, &ConfigError{Field: "HashAlgorithm", Value: strconv.Quote(c.HashAlgorithm),
			Reason: "want one of " + strings.Join(IronicHashAlgorithms(), ", ")}
	}
	if c.PartitionExponent == 0 {
		c.PartitionExponent = DefaultPartitionExponent
	}
	if c.PartitionExponent < 1 || c.PartitionExponent > MaxPartitionExponent {
		return c, &ConfigError{Field: "PartitionExponent", Value: strconv.Itoa(c.PartitionExponent),
			Reason: "want 1 to " + strconv.Itoa(MaxPartitionExponent) + " (0 selects 5)"}
	}
	return c, nil
}

// Member is one participant of a ring: a conductor's hostname and its
// relative weight.
type Member struct {
	// Name identifies the member; for conductors it is the hostname
	// Ironic stores in conductors.hostname. It must be non-empty UTF-8.
	Name string `json:"name"`
	// Weight scales the member's share of keys. Zero means 1, the
	// weight Ironic always uses; the accepted range is 0 to MaxWeight.
	Weight int `json:"weight,omitempty"`
}

// Names returns unweighted members with the given names, the common case.
func Names(names ...string) []Member {
	ms := make([]Member, len(names))
	for i, n := range names {
		ms[i] = Member{Name: n, Weight: 1}
	}
	return ms
}

// Ring is an immutable consistent hash ring. All methods are safe for
// concurrent use; a nil *Ring behaves as an empty ring. To change the
// membership build a new Ring and publish it through a Holder.
type Ring struct {
	cfg     Config
	names   []string // sorted, distinct
	weights []int    // weights[i] belongs to names[i]
	ironic  ironicRing
	bal     balancedRing
}

// New builds a ring of the given members. The result depends only on the
// set of members and the config: the order of members does not matter,
// and the same input gives the same ring in every process. An empty
// member list gives an empty ring, whose lookups return ErrEmptyRing.
// Invalid input returns a *MemberError or *ConfigError.
func New(cfg Config, members ...Member) (*Ring, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	if len(members) > MaxMembers {
		return nil, &ConfigError{Field: "members", Value: strconv.Itoa(len(members)),
			Reason: "a ring holds at most " + strconv.Itoa(MaxMembers) + " members"}
	}
	type indexed struct {
		Member
		at int
	}
	sorted := make([]indexed, len(members))
	total := 0
	for i, m := range members {
		switch {
		case m.Name == "":
			return nil, &MemberError{Index: i, Name: m.Name, Field: "name", Reason: "must not be empty"}
		case !utf8.ValidString(m.Name):
			return nil, &MemberError{Index: i, Name: m.Name, Field: "name", Reason: "must be valid UTF-8"}
		case m.Weight < 0 || m.Weight > MaxWeight:
			return nil, &MemberError{Index: i, Name: m.Name, Field: "weight",
				Reason: "want 0 to " + strconv.Itoa(MaxWeight) + ", got " + strconv.Itoa(m.Weight)}
		}
		if m.Weight == 0 {
			m.Weight = 1
		}
		total += m.Weight
		sorted[i] = indexed{Member: m, at: i}
	}
	slices.SortFunc(sorted, func(a, b indexed) int { return cmp.Compare(a.Name, b.Name) })
	r := &Ring{cfg: cfg, names: make([]string, len(sorted)), weights: make([]int, len(sorted))}
	for i, m := range sorted {
		if i > 0 && sorted[i-1].Name == m.Name {
			return nil, &MemberError{Index: m.at, Name: m.Name, Field: "name",
				Reason: "duplicate of member " + strconv.Itoa(sorted[i-1].at)}
		}
		r.names[i] = m.Name
		r.weights[i] = m.Weight
	}
	perWeight := balancedPointsPerWeight
	if cfg.Algorithm == IronicCompatible {
		perWeight = 1 << cfg.PartitionExponent
	}
	if total*perWeight > MaxPoints {
		return nil, &ConfigError{Field: "members", Value: strconv.Itoa(len(members)) + " members of total weight " + strconv.Itoa(total),
			Reason: "the ring would exceed " + strconv.Itoa(MaxPoints) + " points"}
	}
	if len(r.names) == 0 {
		return r, nil
	}
	switch cfg.Algorithm {
	case IronicCompatible:
		h, _ := parseIronicHash(cfg.HashAlgorithm)
		r.ironic = buildIronic(h, r.names, r.weights, 1<<cfg.PartitionExponent)
	default:
		r.bal = buildBalanced(r.names, r.weights)
	}
	return r, nil
}

// Config returns the normalized config the ring was built with.
func (r *Ring) Config() Config {
	if r == nil {
		c, _ := Config{}.normalized()
		return c
	}
	return r.cfg
}

// Len returns the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.names)
}

// Members returns a copy of the members sorted by name, each with its
// effective weight (never zero).
func (r *Ring) Members() []Member {
	if r == nil {
		return nil
	}
	out := make([]Member, len(r.names))
	for i, n := range r.names {
		out[i] = Member{Name: n, Weight: r.weights[i]}
	}
	return out
}

// Contains reports whether name is a member.
func (r *Ring) Contains(name string) bool {
	_, ok := r.index(name)
	return ok
}

func (r *Ring) index(name string) (int, bool) {
	if r == nil {
		return 0, false
	}
	return slices.BinarySearch(r.names, name)
}

// Get returns the member that owns key: for a conductor ring, the
// conductor that manages the node whose UUID is key. It allocates nothing.
// It returns ErrEmptyRing if the ring has no members.
func (r *Ring) Get(key string) (string, error) {
	if r == nil || len(r.names) == 0 {
		return "", ErrEmptyRing
	}
	if r.cfg.Algorithm == IronicCompatible {
		return r.names[r.ironic.pts[r.ironic.first(key)].owner], nil
	}
	return r.names[r.bal.owner(xxhash.Sum64String(key))], nil
}

// GetN appends to dst up to n distinct members for key, in preference
// order, skipping the members named in ignore (names that are not members
// are allowed and have no effect), and returns the extended slice. The
// first member returned with no ignore list is Get's answer; the first
// returned with ignore = [m] is the member that would own key if m left
// the ring, so GetN(dst, key, 1, dead) names the conductor that takes a
// dead one's node over.
//
// Fewer than n members are returned when fewer are eligible, as tooz's
// get_nodes does; for an IronicCompatible ring the set returned equals
// tooz's. With n <= 0, dst is returned unchanged. An empty ring returns
// ErrEmptyRing, and a ring whose members are all ignored returns
// ErrNoOwner (tooz returns an empty set). GetN allocates nothing when dst
// has room for the result and the ring has at most 1,024 members.
func (r *Ring) GetN(dst []string, key string, n int, ignore ...string) ([]string, error) {
	if r == nil || len(r.names) == 0 {
		return dst, ErrEmptyRing
	}
	if n <= 0 {
		return dst, nil
	}
	var seenBuf [16]uint64
	seen := seenBuf[:]
	if words := (len(r.names) + 63) / 64; words > len(seenBuf) {
		seen = make([]uint64, words)
	}
	eligible := len(r.names)
	for _, name := range ignore {
		if i, ok := r.index(name); ok && seen[i/64]&(1<<(i%64)) == 0 {
			seen[i/64] |= 1 << (i % 64)
			eligible--
		}
	}
	if eligible == 0 {
		return dst, ErrNoOwner
	}
	want := min(n, eligible)
	if r.cfg.Algorithm != IronicCompatible {
		return r.bal.appendRanked(dst, r.names, xxhash.Sum64String(key), want, seen), nil
	}
	points := len(r.ironic.pts)
	i := r.ironic.first(key)
	for steps := 0; want > 0 && steps < points; steps++ {
		m := r.ironic.pts[i].owner
		if seen[m/64]&(1<<(m%64)) == 0 {
			seen[m/64] |= 1 << (m % 64)
			dst = append(dst, r.names[m])
			want--
		}
		if i++; i == points {
			i = 0
		}
	}
	return dst, nil
}
