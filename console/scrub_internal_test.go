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
		// IPA's request lines on the serial console carry its token.
		{"agent token in a request line", nil, []string{`"GET /v1/commands/1?agent_token=N2La-Md&wait=true HTTP/1.1" 200`},
			`"GET /v1/commands/1?agent_token=***&wait=true HTTP/1.1" 200`, []string{""}},
		{"agent token split over pieces", nil, []string{"?agent_to", "ken=N2", "La&wait"}, "?agent_token=***&wait",
			[]string{"agent_to", "agent_token=N2", ""}},
		{"agent token unfinished, masked when flushed", []string{"pa55"}, []string{"pa55 ?agent_token=N2La"}, "*** ?agent_token=***",
			[]string{"agent_token=N2La"}},
		{"key without a value", nil, []string{"agent_token=&x"}, "agent_token=&x", []string{""}},
		{"two tokens", nil, []string{"a agent_token=t1 b agent_token=t2\n"}, "a agent_token=*** b agent_token=***\n", []string{""}},
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
			out.Write(sc.flush(hold))
			if out.String() != tt.want {
				t.Fatalf("emitted %q, want %q", out.String(), tt.want)
			}
		})
	}
	if got := newScrubber([]string{"pa55"}).string("login failed: pa55"); got != "login failed: ***" {
		t.Fatalf("string: %q", got)
	}
	if got := newScrubber(nil).string("GET /v1/commands?agent_token=N2La"); got != "GET /v1/commands?agent_token=***" {
		t.Fatalf("string with a token: %q", got)
	}
}
