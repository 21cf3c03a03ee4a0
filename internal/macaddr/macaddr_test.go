package macaddr

import (
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"52:54:00:12:34:56": "52:54:00:12:34:56", "00:00:00:00:00:00": "00:00:00:00:00:00",
		"52:54:00:AB:cD:EF": "52:54:00:ab:cd:ef", "52-54-00-AB-CD-EF": "52:54:00:ab:cd:ef",
	} {
		if got, ok := Parse(in); !ok || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	bad := []string{
		"52:54:00-12:34:56", "52-54-00:12-34-56", // mixed separators
		"52:54:00:12:34", "52:54:00:12:34:567", "52:54:00:12:34:56:78:9a", // lengths
		"5254.0012.3456", "525400123456", "52.54.00.12.34.56", // other forms
		"52:54:00:12:34:5g", "../54:00:12:34:56", "",
		" 52:54:00:12:34:56", "52:54:00:12:34:56\n", // white space is the caller's
	}
	for _, in := range bad {
		if got, ok := Parse(in); ok || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want a refusal", in, got, ok)
		}
	}
}

// ironicMAC is the rule written as Ironic's validation reads it, a
// regular expression (Go's has no back-reference, so one per separator).
var ironicMAC = regexp.MustCompile(`^(?:[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){5})$`)

// FuzzParse checks Parse against the rule as a regular expression, and
// that its result is the stored form: lower case with colons, a fixed
// point, the same address written with hyphens or in upper case.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"52:54:00:12:34:56", "52-54-00-AB-CD-EF", "52:54:00-12:34:56", "", "zz:zz:zz:zz:zz:zz",
		"5254.0012.3456", " 52:54:00:12:34:56", "52:54:00:12:34:56\n", "01-52-54-00-12-34-56"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mac, ok := Parse(s)
		if ok != ironicMAC.MatchString(s) {
			t.Fatalf("Parse(%q) ok = %v; the rule says %v", s, ok, !ok)
		}
		if !ok {
			if mac != "" {
				t.Fatalf("Parse(%q) failed but returned %q", s, mac)
			}
			return
		}
		if want := strings.ToLower(strings.ReplaceAll(s, "-", ":")); mac != want {
			t.Fatalf("Parse(%q) = %q, want %q", s, mac, want)
		}
		for _, form := range []string{mac, strings.ReplaceAll(mac, ":", "-"), strings.ToUpper(mac)} {
			if again, ok := Parse(form); !ok || again != mac {
				t.Fatalf("Parse(%q) = %q, %v; want %q (the form of %q)", form, again, ok, mac, s)
			}
		}
	})
}
