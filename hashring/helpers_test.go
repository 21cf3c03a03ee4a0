package hashring

import (
	"fmt"
	"math/rand/v2"
)

// uuidFor returns a deterministic, canonical lower-case UUID string for i.
func uuidFor(i int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	return randomUUID(rng)
}

// randomUUID returns a random version-4 UUID in canonical form.
func randomUUID(rng *rand.Rand) string {
	a, b := rng.Uint64(), rng.Uint64()
	a = a&^(0xf<<12) | 0x4<<12
	b = b&^(0x3<<62) | 0x2<<62
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xffff, b>>48, b&0xffffffffffff)
}

// memberNames returns n conductor-like host names.
func memberNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("conductor-%03d.example.org", i)
	}
	return out
}
