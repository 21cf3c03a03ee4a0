package hashring

// Move is one key whose owner differs between two rings.
type Move struct {
	// Key is the key (node UUID).
	Key string
	// From is the old owner, or "" if the old ring was empty.
	From string
	// To is the new owner, or "" if the new ring is empty.
	To string
}

// Moves returns, in the order of keys, every key whose owner differs
// between the before and the after ring: what each conductor must give up
// (From is itself) or take over (To is itself) when the membership
// changes. Either ring may be nil or empty. The rings should share an
// algorithm; comparing rings of different algorithms reports the keys
// whose owner differs between them, which is what a migration from
// IronicCompatible to Balanced would move.
func Moves(before, after *Ring, keys []string) []Move {
	var out []Move
	for _, k := range keys {
		from, _ := before.Get(k)
		to, _ := after.Get(k)
		if from != to {
			out = append(out, Move{Key: k, From: from, To: to})
		}
	}
	return out
}

// MovesFor splits Moves for one member: the keys it takes over (owned by
// another member, or by nobody, before) and the keys it gives up.
func MovesFor(member string, before, after *Ring, keys []string) (acquired, released []string) {
	for _, k := range keys {
		from, _ := before.Get(k)
		to, _ := after.Get(k)
		switch {
		case from == to:
		case to == member:
			acquired = append(acquired, k)
		case from == member:
			released = append(released, k)
		}
	}
	return acquired, released
}
