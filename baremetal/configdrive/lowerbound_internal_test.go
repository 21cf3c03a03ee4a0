package configdrive

import (
	"encoding/json"
	"testing"
)

// userDataLen is the length of the user_data file decoding raw gives, and
// whether raw decodes.
func userDataLen(raw []byte) (int, bool) {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return 0, false
	}
	s, _ := m["user_data"].(string)
	return len(s), true
}

var lowerBoundCases = []struct {
	raw  string
	want int
}{
	{`{"user_data": "abc"}`, 3},
	{`{"meta_data": {"user_data": "zzzzzz"}, "user_data": "ab"}`, 2},
	{`{"user_data": "a\nb\"c\\d"}`, 7},
	{`{"user_data": "\u0041\u00e9\ud83d\ude00"}`, 4},
	{`{"user_data": "big big big", "user_data": "x"}`, 1},
	{`{"user_data": "x", "user_data": {"a": "big big big"}}`, 0},
	{`{"user\u005fdata": "abcd"}`, 4},
	{` { "network_data" : {"links": [{"id": "}]\""}]} , "user_data" : "xy" } `, 2},
	{`{"user_data": ["a", "b"]}`, 0},
	{`{"user_data": null}`, 0},
	{`{}`, 0},
	{`{"user_data": "unterminated`, 0},
	{`"a string"`, 0},
	{`{"user_data" "missing colon"}`, 0},
}

// TestUserDataLowerBound checks the scan Parse uses to refuse an oversized
// config drive before decoding it: exact on plain strings, never above
// what decoding gives (escapes, duplicate keys, nested look-alikes).
func TestUserDataLowerBound(t *testing.T) {
	for _, c := range lowerBoundCases {
		got := userDataLowerBound([]byte(c.raw))
		if got != c.want {
			t.Errorf("userDataLowerBound(%s) = %d, want %d", c.raw, got, c.want)
		}
		if n, ok := userDataLen([]byte(c.raw)); ok && got > n {
			t.Errorf("userDataLowerBound(%s) = %d exceeds the decoded %d", c.raw, got, n)
		}
	}
}

// FuzzUserDataLowerBound checks the bound is a bound: for any input that
// decodes, it never exceeds the decoded user_data's length, so Parse never
// refuses a config drive that would fit.
func FuzzUserDataLowerBound(f *testing.F) {
	for _, c := range lowerBoundCases {
		f.Add([]byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := userDataLowerBound(raw)
		if n, ok := userDataLen(raw); ok && got > n {
			t.Fatalf("userDataLowerBound(%q) = %d exceeds the decoded %d", raw, got, n)
		}
	})
}
