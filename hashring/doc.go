// Package hashring is the consistent hash ring that decides which
// conductor owns which node, so that many conductors share a fleet and a
// dead conductor's nodes move to the survivors, and only those.
//
// The package is pure: no I/O, no clock, no package-level state. A Ring is
// an immutable value built from a set of members; lookups on it allocate
// nothing and are safe for concurrent use. A membership change builds a
// new Ring beside the old one and publishes it through a Holder, so a
// rebuild never blocks a reader.
//
// # Two algorithms behind one API
//
// IronicCompatible is bit-exact with the ring Ironic uses, tooz's
// HashRing configured as Ironic configures it: each member (its name as
// UTF-8) gets 2^PartitionExponent points per unit of weight (Ironic's
// hash_partition_exponent, default 5, so 32), where the i-th point is the
// md5 of a running hash seeded with the name and updated with the name
// again before each point, read as a 128-bit big-endian integer. A key
// (Ironic passes the node's canonical lower-case UUID string) hashes with
// md5 the same way and belongs to the first point strictly greater than
// it (bisect_right), wrapping to the first point past the end. An Anvil
// conductor and an Ironic conductor given the same members therefore
// agree on every node's owner, which lets an operator run both side by
// side or migrate from one to the other. The test suite reproduces every
// lookup in testdata/tooz-hashring.json and testdata/tooz-extra.json,
// both computed by real tooz (3.1.0): every hashlib function Ironic's
// hash_ring_algorithm can name that Go's standard library provides (md5,
// the SHA-1, SHA-2 and SHA-3 families; Config.HashAlgorithm), other
// partition exponents, weights, and replica lists with ignore lists.
//
// Balanced, the zero value and Anvil's default, keeps the same shape (a
// ring of virtual points, a key owned by the first point after its hash)
// with three changes:
//
//   - 512 points per member per unit of weight instead of 32. A member's
//     share of the key space is the sum of the arcs before its points, so
//     its relative spread falls as one over the square root of the point
//     count: about 4.4% instead of Ironic's 18%.
//   - XXH64 (seed 0) instead of md5 for keys, and the SplitMix64 stream
//     seeded with XXH64(name) for point positions: the n-th point (from 0)
//     of a member is splitMix64(XXH64(name) + (n+1)·0x9e3779b97f4a7c15)
//     with its low 16 bits cleared (48-bit positions, which leaves room to
//     store the member beside the position). A key belongs to the first
//     point whose position is greater than the top 48 bits of
//     XXH64(key), wrapping around. XXH64 and SplitMix64 are published,
//     language-independent definitions, so another implementation can
//     reproduce a Balanced ring; testdata/balanced-golden.json pins
//     owners so the definition cannot drift.
//   - A bucket index over the top bits of a position (half a point per
//     bucket on small rings, eight on large ones, so it stays in cache),
//     so a lookup reads one index entry and scans a cache line or two
//     instead of binary-searching: O(1) instead of O(log points).
//
// Points at the same position are ordered by member name; every lookup
// therefore ranks members in an order that depends only on the key and
// the member names, never on which other members are present. That is
// what makes movement minimal for both algorithms: removing a member
// moves exactly the keys it owned, and adding one moves keys only to it.
//
// # Why this algorithm
//
// The issue asked to choose from measurements. These were the
// candidates, with what decided against each:
//
//   - Rendezvous (highest random weight) hashing balances perfectly and
//     moves minimally, but a lookup hashes every member: 1,000 hashes per
//     lookup at 1,000 members.
//   - Jump consistent hashing is fast and balanced, but members are
//     numbered buckets: removing any member but the last renumbers the
//     others and moves most keys.
//   - Maglev tables balance to within one slot and look up in O(1), but
//     a membership change also shuffles some slots between members that
//     did not change, which breaks the "only to or from the changed
//     member" property the takeover logic relies on.
//   - Multi-probe consistent hashing (few points per member, many probes
//     per key) was prototyped. With the probe offsets fixed, which keeps a
//     single lookup, it degenerates into a ring with members×probes
//     points (share spread 0.27 at 100 members with 21 probes, worse than
//     a plain ring of 21 points); with independent probes the spread was
//     0.18 with 21 probes, for 21 searches per lookup.
//   - Bounded-load consistent hashing caps every member's load, but the
//     owner of a key then depends on which other keys exist, so two
//     conductors that see slightly different node lists disagree.
//
// Any scheme in which a key's owner ignores members other than the
// candidates (the minimal-movement property) ranks members per key, as
// rendezvous and rings do; its balance then improves only with the
// number of independent regions it has, at a cost per region. A ring pays
// the least per region (one hash, one counting-sort step), so Balanced is
// a ring with as many points as the 5 ms build budget for 1,000 members
// allows. See "Measurements" below.
//
// # Measurements
//
// Balance and movement are deterministic (fixed random UUIDs, fixed
// names), so these figures are exact for this code; they come from
// BenchmarkBalance over 100,000 random UUIDs. "max/mean" and
// "stddev/mean" are keys per member; "share" is the exact fraction of the
// hash circle each member owns (what an unbounded fleet would see);
// "floor" is an ideal assignment (XXH64(key) mod n, exactly 1/n of the
// circle each), i.e. the sampling noise of 100,000 keys that no algorithm
// can beat:
//
//	members  algorithm          max/mean  stddev/mean  share max/mean  share stddev  floor max/mean
//	3        IronicCompatible   1.142     0.127        1.140           0.122         1.005
//	3        Balanced           1.034     0.038        1.032           0.038         1.005
//	10       IronicCompatible   1.595     0.273        1.604           0.274         1.015
//	10       Balanced           1.087     0.058        1.088           0.054         1.015
//	100      IronicCompatible   1.628     0.190        1.634           0.187         1.094
//	100      Balanced           1.143     0.052        1.132           0.041         1.094
//	1000     IronicCompatible   1.980     0.201        1.706           0.173         1.370
//	1000     Balanced           1.370     0.111        1.138           0.044         1.370
//
// The aim of max/mean <= 1.05 at 100 members over 100,000 keys
// is below the floor: with 1,000 keys expected per member, the sampling
// spread alone is sqrt(1000)/1000 = 3.2%, and the largest of 100 such
// counts sits about 2.5 spreads above the mean (1.094 for these keys).
// What an algorithm controls is the share spread, and that is where the
// point count was chosen (100 and 1,000 members, same keys):
//
//	points per member  share stddev (100 / 1000)  max/mean at 100  build work at 1000 members
//	128                0.087 / 0.093              1.237            128k points
//	256                0.059 / 0.061              1.154            256k points
//	512 (chosen)       0.041 / 0.044              1.143            512k points
//	1024               0.031 / 0.030              1.105            1M points
//	2048               0.023 / 0.022              1.069            2M points
//
// The spread halves only for each quadrupling of points, while build
// work, memory (8 bytes a point) and cache misses grow linearly; 512 is
// the compromise with the 5 ms build budget at 1,000 members, which the
// measurements below straddle on this shared machine.
//
// Speed was measured with
//
//	go test -run '^$' -bench . -benchmem ./hashring/
//
// on the project's 2-core VM (AMD EPYC "Turin-like") while the rest of
// the team's builds kept its load average between 6 and 7.5, so
// wall-clock ns/op includes time spent waiting for a core; cpu-ns/op is
// the benchmark thread's own CPU time. Lookups draw keys from 65,536
// random UUIDs, and every lookup allocates nothing (0 B/op, 0 allocs/op):
//
//	members  Balanced wall / cpu ns  IronicCompatible wall / cpu ns  Ironic 21.4 (Python)
//	3        55.3 / 26.7             195 / 142                       2,193 (456k/s)
//	10       83.8 / 30.3             185 / 140                       2,500 (400k/s)
//	100      85.9 / 49.6             197 / 148                       3,937 (254k/s)
//	1000     179 / 86.4              330 / 184                       -
//
// XXH64 of a UUID alone took 17.7 ns wall and md5 158 ns in the same run,
// so the key hash is much of a lookup on small rings; on large ones the
// cost is the cache misses of a ring that no longer fits in cache
// (512,000 points are 4 MiB). A build of 1,000 members took 7.2 ms of CPU
// (11.7 ms wall) for Balanced, 4.3 to 7.3 ms of CPU across repeated
// runs, and 10.5 ms of CPU for IronicCompatible; 100 members take
// 0.36 ms.
//
// Movement is minimal by construction for both algorithms (a key moves
// only if its owner left or the new member took it: "stray-moves" is 0 in
// every run, and the property and fuzz tests check it), so the fraction
// moved equals the changed member's share: within a few percent of the
// ideal 1/n and 1/(n+1) for Balanced, where IronicCompatible's 18-27%
// share spread shows (0.0076 moved on add at 100 members against 0.0099).
//
// # Usage
//
// Build a ring and look keys up:
//
//	ring, err := hashring.New(hashring.Config{}, hashring.Names("c1", "c2", "c3")...)
//	owner, err := ring.Get(node.UUID)              // ErrEmptyRing if no members
//	next, err := ring.GetN(buf[:0], node.UUID, 1, owner) // who takes over if owner dies
//
// Conductors build one ring per conductor group and hardware type, keyed
// "<group>:<hardware type>" as in Ironic, and publish them atomically:
//
//	rings, err := hashring.NewGroupRings(cfg, conductors) // []hashring.Conductor
//	holder := hashring.NewHolder(rings)
//	owner, err := holder.Load().Get(node.ConductorGroup, node.Driver, node.UUID)
//	// on a membership change:
//	old := holder.Swap(newRings)
//
// A missing ring is a *NoRingError (errors.Is ErrNoRing): no live
// conductor of that group enables that hardware type; there is no
// fallback between groups. Moves and MovesFor compare two rings over a
// set of keys and report which keys change owner: what a conductor must
// take over or give up.
//
// To run beside (or migrate from) Ironic, build every ring with
// Config{Algorithm: IronicCompatible, PartitionExponent: e} where e is
// Ironic's hash_partition_exponent.
package hashring
