package baremetal

import (
	"fmt"
	"strings"
)

// MaxNodeNameLength is the longest node name accepted, in characters: the
// width of Ironic's nodes.name column (string(255)) and the bound of its
// is_valid_logical_name.
const MaxNodeNameLength = 255

// ValidNodeName reports whether name is acceptable as a node (or port)
// name. The rules are Ironic's is_valid_node_name, plus one of Anvil's:
//
//   - 1 to MaxNodeNameLength characters;
//   - only RFC 3986 unreserved characters: ALPHA / DIGIT / "-" / "." /
//     "_" / "~";
//   - not UUID-like: 32 hexadecimal digits once hyphens are removed, in any
//     case and with hyphens anywhere, as oslo's is_uuid_like reads it, so a
//     name is never mistaken for a UUID when a node is looked up;
//   - not "." or ".." (beyond Ironic): as a URL path segment they are
//     removed by path cleaning, so /v1/heartbeat/. would reach another
//     route than the node's.
func ValidNodeName(name string) bool { return nodeNameProblem(name) == "" }

// CheckNodeName returns nil when name is empty (no name) or valid by the
// rules of ValidNodeName, and otherwise an *InvalidFieldError on field
// "name" of the node ident that says which rule the name breaks.
func CheckNodeName(ident, name string) error {
	if name == "" {
		return nil
	}
	if p := nodeNameProblem(name); p != "" {
		return &InvalidFieldError{Kind: "node", Ident: ident, Field: "name", Expected: p}
	}
	return nil
}

// nodeNameProblem returns what a valid name would have been instead of
// name, or "" when name is valid.
func nodeNameProblem(name string) string {
	if name == "" {
		return "a non-empty name"
	}
	if len(name) > MaxNodeNameLength {
		return fmt.Sprintf("at most %d characters (got %d)", MaxNodeNameLength, len(name))
	}
	for i := 0; i < len(name); i++ {
		if !unreserved(name[i]) {
			return fmt.Sprintf("only RFC 3986 unreserved characters (letters, digits, '-', '.', '_', '~'); byte %d is %q", i, name[i])
		}
	}
	if name == "." || name == ".." {
		return `a name other than "." and ".." (path segments that URL path cleaning removes)`
	}
	if uuidLike(name) {
		return "a name that is not UUID-like (32 hexadecimal digits once hyphens are removed would be read as a UUID)"
	}
	return ""
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// uuidLike reports whether s reads as a UUID to oslo's is_uuid_like once
// hyphens are removed (the braces and urn:uuid: prefixes it also strips
// cannot appear in a valid name).
func uuidLike(s string) bool {
	hex := strings.ReplaceAll(s, "-", "")
	if len(hex) != 32 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
