package console

import (
	"strings"
	"testing"
)

func TestScrubberSplit(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		pieces  []string
		want    string // everything emitted, held tail flushed at the end
		held    []string
	}{
		{"no secrets", nil, []string{"abc", "def"}, "abcdef", []string{"", ""}},
		{"whole secret", []string{"pa55"}, []string{"x pa55 y"}, "x *** y", []string{""}},
		{"split secret", []string{"pa55"}, []string{"x p", "a", "55 y"}, "x *** y", []string{"p", "pa", ""}},
		{"prefix that is not the secret", []string{"pa55"}, []string{"x pa", "rt"}, "x part", []string{"pa", ""}},
		{"held tail released at the end", []string{"pa55"}, []string{"x pa5"}, "x pa5", []string{"pa5"}},
		{"two secrets", []string{"pa55", "user9"}, []string{"us", "er9:pa", "55"}, "***:***", []string{"us", "pa", ""}},
		{"empty secret ignored", []string{""}, []string{"abc"}, "abc", []string{""}},
		{"repeated", []string{"s3"}, []string{"s3s3s", "3"}, "*********", []string{"s", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := newScrubber(tt.secrets)
			var out strings.Builder
			var hold []byte
			for i, p := range tt.pieces {
				var emit []byte
				emit, hold = sc.split(hold, []byte(p))
				out.Write(emit)
				if string(hold) != tt.held[i] {
					t.Fatalf("after piece %d (%q): held %q, want %q", i, p, hold, tt.held[i])
				}
			}
			out.Write(hold)
			if out.String() != tt.want {
				t.Fatalf("emitted %q, want %q", out.String(), tt.want)
			}
		})
	}
	if got := newScrubber([]string{"pa55"}).string("login failed: pa55"); got != "login failed: ***" {
		t.Fatalf("string: %q", got)
	}
}
