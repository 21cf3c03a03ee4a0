// Package macaddr owns the one rule by which Anvil reads a MAC address,
// Ironic's: six pairs of hexadecimal digits, in any case, separated all
// by ':' or all by '-'. An address is kept in one form, lower case with
// colons ("52:54:00:ab:cd:ef").
//
// Every package that reads a MAC address (port addresses, lookup
// queries, inspection data, boot server paths, DHCPv6 hints) calls
// Parse; what it does around the rule (trimming white space from a
// request, the PXE BOOTIF prefix, refusing the zero address) is its own
// and said where it is done.
package macaddr

// Parse reads s by the rule and returns it lower case with colons; ok is
// false, and the string empty, for anything else: mixed separators,
// other forms (dotted, bare hex), other lengths (EUI-64, InfiniBand),
// surrounding white space.
func Parse(s string) (mac string, ok bool) {
	if len(s) != 17 {
		return "", false
	}
	sep := s[2]
	if sep != ':' && sep != '-' {
		return "", false
	}
	var b [17]byte
	for i := range len(s) {
		c := s[i]
		if i%3 == 2 {
			if c != sep {
				return "", false
			}
			b[i] = ':'
			continue
		}
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", false
		}
		b[i] = c
	}
	return string(b[:]), true
}
