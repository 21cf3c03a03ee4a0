package hashring

import (
	"crypto/md5"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// The benchmarks print, in one run, every figure the issue compares with
// Ironic's: lookup cost, balance and movement over 100,000 random UUIDs,
// and build time. Run them with
//
//	go test -run '^$' -bench . -benchmem ./hashring/

var benchSizes = []int{3, 10, 100, 1000}

// BenchmarkLookup measures Get on a ring of n members with keys drawn
// from a pool of 65,536 random UUIDs, so the ring's memory is touched the
// way a fleet-wide sweep touches it.
func BenchmarkLookup(b *testing.B) {
	keys := testKeys(1<<16, 11)
	for _, alg := range algorithms {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/members=%d", alg, n), func(b *testing.B) {
				r := mustNew(b, Config{Algorithm: alg}, Names(memberNames(n)...)...)
				b.ReportAllocs()
				var sink string
				i := 0
				stop := threadCPU()
				for b.Loop() {
					sink, _ = r.Get(keys[i&(1<<16-1)])
					i++
				}
				reportCPU(b, stop, "cpu-ns/op", 1)
				if sink == "" {
					b.Fatal("no owner")
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
			})
		}
	}
}

// BenchmarkKeyHash measures the key hash alone (XXH64 for Balanced, md5
// for IronicCompatible): the floor under each algorithm's lookup cost,
// and a gauge of how busy the machine was during the run.
func BenchmarkKeyHash(b *testing.B) {
	keys := testKeys(1<<16, 11)
	b.Run("xxh64", func(b *testing.B) {
		var sink uint64
		i := 0
		for b.Loop() {
			sink += xxhash.Sum64String(keys[i&(1<<16-1)])
			i++
		}
		if sink == 0 {
			b.Log(sink)
		}
	})
	b.Run("md5", func(b *testing.B) {
		var sink byte
		i := 0
		for b.Loop() {
			d := md5.Sum(keyBytes(keys[i&(1<<16-1)]))
			sink += d[0]
			i++
		}
		if sink == 0 {
			b.Log(sink)
		}
	})
}

// BenchmarkTakeover measures GetN(key, 1, ignore owner): who takes a
// node over when its owner is gone.
func BenchmarkTakeover(b *testing.B) {
	keys := testKeys(1<<16, 12)
	for _, alg := range algorithms {
		b.Run(fmt.Sprintf("%s/members=100", alg), func(b *testing.B) {
			names := memberNames(100)
			r := mustNew(b, Config{Algorithm: alg}, Names(names...)...)
			buf := make([]string, 0, 1)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				buf, _ = r.GetN(buf[:0], keys[i&(1<<16-1)], 1, names[i%100])
				i++
			}
		})
	}
}

// BenchmarkBalance assigns 100,000 random UUIDs (one op) and reports:
// max/mean and stddev/mean of keys per member; share-max/mean and
// share-stddev/mean, the same over the whole hash space (exact arcs for
// IronicCompatible, 2,097,152 evenly spread key hashes for Balanced, see
// hashShares); floor-max/mean and
// floor-stddev/mean, the same figures for an ideal assignment (XXH64 of
// the key modulo n, which gives every member exactly 1/n of the hash
// space), i.e. the part that is sampling noise of 100,000 keys; the
// fraction of keys that move when the middle member is removed and when
// a new member is added, with the ideal 1/n and 1/(n+1); and stray-moves,
// the number of keys that moved between two members neither of which
// changed (must be 0).
func BenchmarkBalance(b *testing.B) {
	const nkeys = 100_000
	keys := testKeys(nkeys, 13)
	for _, alg := range algorithms {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/members=%d", alg, n), func(b *testing.B) {
				cfg := Config{Algorithm: alg}
				names := memberNames(n)
				r := mustNew(b, cfg, Names(names...)...)
				var counts map[string]int
				for b.Loop() {
					counts = make(map[string]int, n)
					for _, k := range keys {
						o, _ := r.Get(k)
						counts[o]++
					}
				}
				perMember := make([]float64, n)
				for i, name := range names {
					perMember[i] = float64(counts[name])
				}
				maxMean, sdMean := spread(perMember)
				b.ReportMetric(maxMean, "max/mean")
				b.ReportMetric(sdMean, "stddev/mean")
				shares := arcShares
				if alg == Balanced {
					shares = hashShares
				}
				shareMax, shareSd := spread(shares(r))
				b.ReportMetric(shareMax, "share-max/mean")
				b.ReportMetric(shareSd, "share-stddev/mean")

				floor := make([]float64, n)
				for _, k := range keys {
					floor[xxhash.Sum64String(k)%uint64(n)]++
				}
				fMax, fSd := spread(floor)
				b.ReportMetric(fMax, "floor-max/mean")
				b.ReportMetric(fSd, "floor-stddev/mean")

				gone := names[n/2]
				removed := mustNew(b, cfg, Names(slices.Delete(slices.Clone(names), n/2, n/2+1)...)...)
				added := mustNew(b, cfg, Names(append(slices.Clone(names), "conductor-new.example.org")...)...)
				stray := 0
				movesRemove := Moves(r, removed, keys)
				for _, m := range movesRemove {
					if m.From != gone {
						stray++
					}
				}
				movesAdd := Moves(r, added, keys)
				for _, m := range movesAdd {
					if m.To != "conductor-new.example.org" {
						stray++
					}
				}
				b.ReportMetric(float64(len(movesRemove))/nkeys, "moved-remove")
				b.ReportMetric(1/float64(n), "ideal-remove")
				b.ReportMetric(float64(len(movesAdd))/nkeys, "moved-add")
				b.ReportMetric(1/float64(n+1), "ideal-add")
				b.ReportMetric(float64(stray), "stray-moves")
			})
		}
	}
}

// arcShares returns each member of an IronicCompatible ring's exact
// share of the hash circle: the balance an infinite number of keys would
// see, free of the sampling noise of 100,000 keys. (A Balanced ring's
// owner is not a function of arcs alone; hashShares samples it.)
func arcShares(r *Ring) []float64 {
	shares := make([]float64, r.Len())
	pts := r.ironic.pts
	for i, p := range pts {
		shares[p.owner] += float64(p.hi - pts[(i+len(pts)-1)%len(pts)].hi)
	}
	return shares
}

// reportCPU reports the thread CPU time per op, scaled from nanoseconds
// by scale, when the platform can measure it.
func reportCPU(b *testing.B, stop func() (time.Duration, bool), unit string, scale float64) {
	if d, ok := stop(); ok && b.N > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N)*scale, unit)
	}
}

// spread returns max/mean and stddev/mean (population) of counts.
func spread(counts []float64) (maxMean, sdMean float64) {
	var sum, mx float64
	for _, c := range counts {
		sum += c
		mx = max(mx, c)
	}
	mean := sum / float64(len(counts))
	var ss float64
	for _, c := range counts {
		ss += (c - mean) * (c - mean)
	}
	return mx / mean, math.Sqrt(ss/float64(len(counts))) / mean
}

// BenchmarkBuild measures building a ring of n members.
func BenchmarkBuild(b *testing.B) {
	for _, alg := range algorithms {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/members=%d", alg, n), func(b *testing.B) {
				members := Names(memberNames(n)...)
				b.ReportAllocs()
				stop := threadCPU()
				for b.Loop() {
					if _, err := New(Config{Algorithm: alg}, members...); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, stop, "cpu-ms/build", 1e-6)
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/build")
			})
		}
	}
}
