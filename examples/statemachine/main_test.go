package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestFormats(t *testing.T) {
	cases := []struct {
		format string
		check  func(t *testing.T, out []byte)
	}{
		{"json", func(t *testing.T, out []byte) {
			var doc struct {
				States      []json.RawMessage `json:"states"`
				Transitions []struct {
					From, Event, To string
				} `json:"transitions"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			if len(doc.States) != 30 || len(doc.Transitions) != 93 {
				t.Errorf("JSON has %d states and %d transitions, want 30 and 93", len(doc.States), len(doc.Transitions))
			}
		}},
		{"dot", func(t *testing.T, out []byte) {
			if !bytes.HasPrefix(out, []byte(`digraph "ironic-provision" {`)) {
				t.Errorf("DOT output starts %q", firstLine(out))
			}
			if n := bytes.Count(out, []byte("[label=\"")); n < 93 {
				t.Errorf("DOT output has %d labelled lines, want at least 93 edges", n)
			}
			renderDOT(t, out)
		}},
		{"mermaid", func(t *testing.T, out []byte) {
			if !bytes.HasPrefix(out, []byte("stateDiagram-v2\n")) {
				t.Errorf("Mermaid output starts %q", firstLine(out))
			}
			if n := bytes.Count(out, []byte(" --> ")); n != 94 {
				t.Errorf("Mermaid output has %d arrows, want 93 transitions and the initial arrow", n)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run([]string{"-format", c.format}, &stdout, &stderr); err != nil {
				t.Fatalf("run: %v (stderr: %s)", err, stderr.String())
			}
			if stderr.Len() != 0 {
				t.Errorf("unexpected stderr: %s", stderr.String())
			}
			c.check(t, stdout.Bytes())
		})
	}
}

// renderDOT runs Graphviz on the DOT output when it is installed. CI sets
// ANVIL_REQUIRE_GRAPHVIZ=1 so that a missing dot fails instead of skipping.
func renderDOT(t *testing.T, dot []byte) {
	t.Helper()
	path, err := exec.LookPath("dot")
	if err != nil {
		if os.Getenv("ANVIL_REQUIRE_GRAPHVIZ") != "" {
			t.Fatal("ANVIL_REQUIRE_GRAPHVIZ is set but Graphviz's dot is not installed")
		}
		t.Skip("Graphviz dot not installed (apt-get install graphviz); set ANVIL_REQUIRE_GRAPHVIZ=1 to require it")
	}
	cmd := exec.Command(path, "-Tsvg")
	cmd.Stdin = bytes.NewReader(dot)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dot -Tsvg: %v\n%s", err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("dot -Tsvg warned: %s", stderr.String())
	}
	svg := stdout.String()
	if !strings.Contains(svg, "<svg") || !strings.Contains(svg, "wait call&#45;back") {
		t.Errorf("dot -Tsvg output does not look like the machine's SVG (%d bytes)", len(svg))
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{{"-format", "yaml"}, {"-nope"}, {"extra"}} {
		var stdout, stderr bytes.Buffer
		err := run(args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want errUsage", args, err)
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) wrote to stdout: %q", args, stdout.String())
		}
		if !strings.Contains(stderr.String(), "-format") {
			t.Errorf("run(%q) stderr lacks usage: %q", args, stderr.String())
		}
	}
}

func TestDefaultFormatIsJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(stdout.Bytes()) {
		t.Error("default output is not JSON")
	}
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return string(line)
}
