package mask

import (
	"strings"
	"unicode"
)

// Placeholder is the text that replaces a secret value, Ironic's.
const Placeholder = "******"

// fragments are the normalised key fragments (lower case, no separators)
// whose values are secrets; see the package documentation.
var fragments = [...]string{
	// oslo.utils mask_dict_password.
	"adminpass", "password", "authtoken", "newpass", "authpassword",
	"secretuuid", "secret", "syspswd", "token", "configdrive", "chappassword",
	"encryptedkey", "privatekey", "fernetkey", "sslkey", "passphrase",
	"cephclusterfsid", "octaviaheartbeatkey", "rabbitcookie",
	"cephmanilaclientkey", "pacemakerremoteauthkey", "designaterndckey",
	"cephadminkey", "heatauthencryptionkey", "cephclientkey",
	"keystonecredential", "barbicansimplecryptokek", "cephrgwkey",
	"swifthashsuffix", "migrationsshkey", "cephmdskey", "cephmonkey",
	"chapsecret",
	// Ironic's node_sanitize.
	"snmpauthkey", "snmpprivkey",
	// Anvil's additions.
	"passwd", "pswd", "credential", "authorization", "apikey", "accesskey",
	"authkey", "privkey",
}

// lastWords are the final words that make a key a secret on their own.
var lastWords = [...]string{"pass", "pwd", "pw"}

// IsSecretKey reports whether a value stored under key is a secret, by
// the rules of the package documentation.
func IsSecretKey(key string) bool {
	if key == "" {
		return false
	}
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		switch r {
		case '_', '-', '.', ' ':
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	norm := b.String()
	for _, f := range fragments {
		if strings.Contains(norm, f) {
			return true
		}
	}
	last := lastWord(key)
	for _, w := range lastWords {
		if last == w {
			return true
		}
	}
	return false
}

// lastWord returns the lower-cased last word of key, words being split
// at non-alphanumerics and where a lower-case letter or digit is followed
// by an upper-case one.
func lastWord(key string) string {
	var word []rune
	var prev rune
	for _, r := range key {
		switch {
		case !isAlnum(r):
			if len(word) > 0 {
				word = word[:0]
				prev = 0
			}
			continue
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			word = word[:0]
		}
		word = append(word, unicode.ToLower(r))
		prev = r
	}
	return string(word)
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Map returns a deep copy of m with the value of every secret key
// replaced by Placeholder (nil values stay nil), nested maps and lists
// masked the same way and other strings scanned with Text. m is not
// changed; Map(nil) is nil.
func Map(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if IsSecretKey(k) {
			if v == nil {
				out[k] = nil
			} else {
				out[k] = Placeholder
			}
			continue
		}
		out[k] = Value(v)
	}
	return out
}

// Value masks one JSON-like value as Map masks the values of keys that
// are not secrets: maps recursively, lists element by element, strings
// with Text; other values are returned as they are.
func Value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return Map(t)
	case map[string]string:
		out := make(map[string]string, len(t))
		for k, s := range t {
			if IsSecretKey(k) {
				out[k] = Placeholder
			} else {
				out[k] = Text(s)
			}
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(t))
		for i, e := range t {
			out[i] = Map(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = Value(e)
		}
		return out
	case []string:
		out := make([]string, len(t))
		for i, e := range t {
			out[i] = Text(e)
		}
		return out
	case string:
		return Text(t)
	default:
		return v
	}
}
