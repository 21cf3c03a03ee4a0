package mask

import (
	"regexp"
	"strings"
)

// keyToken is a key as written in text: letters, digits, '_', '.', '-'
// (so "--password" and "X-Auth-Token" are one token).
const keyToken = `[A-Za-z0-9_.\-]+`

// bareValue is an unquoted value: up to white space, a quote or a
// delimiter.
const bareValue = `[^\s"'&,;)\]}<>]+`

const (
	dquoted = `"(?:[^"\\]|\\.)*"`
	squoted = `'(?:[^'\\]|\\.)*'`
)

// A pattern finds one form of "key, separator, value". Its groups are the
// key (checked with IsSecretKey; absent when the form implies a secret)
// and the value; everything else is kept.
type pattern struct {
	re       *regexp.Regexp
	keyGroup int // 0: no key check
	valGroup int
	// notInURL skips a key right after "//": that is the user of a URL's
	// userinfo (https://token:x@host), whose password the userinfo
	// pattern masks without eating the host.
	notInURL bool
}

var patterns = []pattern{
	// key=value, key = "value".
	{regexp.MustCompile(`(` + keyToken + `)[ \t]*=[ \t]*(` + dquoted + `|` + squoted + `|` + bareValue + `)`), 1, 2, false},
	// "key": "value", "key": 123 and the single-quoted forms.
	{regexp.MustCompile(`"([^"\\\n]{1,256})"[ \t]*:[ \t]*(` + dquoted + `|-?[0-9][0-9.eE+\-]*)`), 1, 2, false},
	{regexp.MustCompile(`'([^'\\\n]{1,256})'[ \t]*:[ \t]*u?(` + squoted + `|-?[0-9][0-9.eE+\-]*)`), 1, 2, false},
	// key: "value", key: 'value'.
	{regexp.MustCompile(`(` + keyToken + `)[ \t]*:[ \t]*(` + dquoted + `|` + squoted + `)`), 1, 2, false},
	// key:value (Go's %v), key:[v1 v2] (http.Header).
	{regexp.MustCompile(`(` + keyToken + `):(\[[^\]\n]*\]|[^\s"'&,;)\]}<>]+)`), 1, 2, true},
	// <key>value</key>.
	{regexp.MustCompile(`<(` + keyToken + `)>([^<]+)</`), 1, 2, false},
	// scheme://user:password@host.
	{regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@"'<>]*:([^@\s/"'<>]+)@`), 0, 1, false},
	// Authorization: Basic <credentials>.
	{regexp.MustCompile(`(?i)authorization["']?\s*[:=]\s*\[?["']?\s*(?:basic|bearer|negotiate)\s+([^\s"'\],;]+)`), 0, 1, false},
}

// ipmitoolFlag is a value-taking ipmitool option whose value is a secret
// (-P password, -k and -y the BMC key), attached or separate.
var ipmitoolFlag = regexp.MustCompile(`(?:^|\s)-[Pky][ \t]*([^\s"']+)`)

// Text returns s with every secret value written next to its key replaced
// by Placeholder, by the rules of the package documentation.
func Text(s string) string {
	hasIPMI := strings.Contains(s, "ipmitool")
	if !hasIPMI && !strings.ContainsAny(s, "=:<") {
		return s
	}
	for _, p := range patterns {
		s = p.apply(s)
	}
	if hasIPMI {
		s = maskIPMItool(s)
	}
	return s
}

func (p pattern) apply(s string) string {
	ms := p.re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		if p.keyGroup > 0 && !IsSecretKey(s[m[2*p.keyGroup]:m[2*p.keyGroup+1]]) {
			continue
		}
		if p.notInURL && strings.HasSuffix(s[:m[2*p.keyGroup]], "//") {
			continue
		}
		vs, ve := m[2*p.valGroup], m[2*p.valGroup+1]
		vs, ve = unquote(s, vs, ve)
		if vs >= ve {
			continue
		}
		b.WriteString(s[last:vs])
		b.WriteString(Placeholder)
		last = ve
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// unquote narrows the value s[vs:ve] to the inside of its quotes or
// brackets, if it has them.
func unquote(s string, vs, ve int) (int, int) {
	if ve-vs >= 2 {
		switch s[vs] {
		case '"', '\'', '[':
			return vs + 1, ve - 1
		}
	}
	return vs, ve
}

// maskIPMItool masks the secret option values of each ipmitool command
// line in s, from the word ipmitool to the end of its line.
func maskIPMItool(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.Index(s, "ipmitool")
		if i < 0 {
			b.WriteString(s)
			break
		}
		end := strings.IndexByte(s[i:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += i
		}
		b.WriteString(s[:i])
		line := s[i:end]
		b.WriteString(pattern{re: ipmitoolFlag, valGroup: 1}.apply(line))
		s = s[end:]
	}
	return b.String()
}
