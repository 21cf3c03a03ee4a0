package plugintest

import (
	"strings"
	"testing"
)

// TestBuildRefusals checks that a plugin that cannot be built, or whose
// name would leave the build directory, fails with an error naming it
// (and, for a build, the go command's output) instead of a missing file.
func TestBuildRefusals(t *testing.T) {
	for _, tc := range []struct {
		p    *Plugin
		want []string
	}{
		{&Plugin{Package: "./no-such-package", Name: "acme"}, []string{"building plugin acme from ./no-such-package", "no-such-package"}},
		{&Plugin{Package: ".", Name: "../acme"}, []string{`plugin "../acme"`, "without a path separator"}},
		{&Plugin{Name: "acme"}, []string{`plugin "acme" of package ""`}},
	} {
		path, err := build(tc.p, t.TempDir())
		if err == nil || path != "" {
			t.Errorf("%s: build = %q, %v", tc.p.Name, path, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.p.Name, err, w)
			}
		}
	}
}
