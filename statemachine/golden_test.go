package statemachine_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ and the diagram in README.md")

// checkGolden compares got with the file at path, or rewrites the file
// when -update is set.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("update %s: %v", path, err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (run `go test ./statemachine -update` to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date; run `go test ./statemachine -update` and review the diff.\n%s", path, firstDifference(want, got))
	}
}

// firstDifference describes the first line where want and got differ.
func firstDifference(want, got []byte) string {
	wl := strings.Split(string(want), "\n")
	gl := strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  file: " + w + "\n  code: " + g
		}
	}
	return "(no line differs)"
}

func TestGoldenExports(t *testing.T) {
	m := statemachine.NewProvisionMachine()
	exports := []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"provision.json", func(b *bytes.Buffer) error { return m.WriteJSON(b) }},
		{"provision.dot", func(b *bytes.Buffer) error { return m.WriteDOT(b) }},
		{"provision.mmd", func(b *bytes.Buffer) error { return m.WriteMermaid(b) }},
	}
	for _, e := range exports {
		t.Run(e.file, func(t *testing.T) {
			var buf bytes.Buffer
			if err := e.write(&buf); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", e.file), buf.Bytes())
		})
	}
}

// TestExportedJSONEqualsReference decodes the JSON export, as a consumer
// of `go run ./examples/statemachine -format json` would, and compares it
// with the reference table.
func TestExportedJSONEqualsReference(t *testing.T) {
	var buf bytes.Buffer
	if err := statemachine.NewProvisionMachine().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var exported struct {
		States []struct {
			Name   string `json:"name"`
			Stable bool   `json:"stable"`
			Target string `json:"target"`
		} `json:"states"`
		Transitions []struct {
			From  string `json:"from"`
			Event string `json:"event"`
			To    string `json:"to"`
		} `json:"transitions"`
	}
	if err := json.Unmarshal(buf.Bytes(), &exported); err != nil {
		t.Fatalf("decode export: %v", err)
	}
	ref := loadReference(t)
	if len(exported.States) != 30 || len(exported.Transitions) != 93 {
		t.Fatalf("export has %d states and %d transitions, want 30 and 93", len(exported.States), len(exported.Transitions))
	}
	type row struct{ from, event, to string }
	want := make(map[row]bool)
	for _, tr := range ref.Transitions {
		want[row{tr.From, tr.Event, tr.To}] = true
	}
	for _, tr := range exported.Transitions {
		r := row{tr.From, tr.Event, tr.To}
		if !want[r] {
			t.Errorf("exported transition %v is not in the reference", r)
		}
		delete(want, r)
	}
	for r := range want {
		t.Errorf("reference transition %v missing from the export", r)
	}
	for _, s := range exported.States {
		wantTarget := ""
		if p := ref.StateTargets[s.Name]; p != nil {
			wantTarget = *p
		}
		if s.Target != wantTarget || s.Stable != slices.Contains(ref.StableStates, s.Name) {
			t.Errorf("exported state %+v disagrees with the reference (target %q)", s, wantTarget)
		}
	}
}

// The README's diagram sits between these markers; everything else in the
// README is hand-written.
const (
	readmeBegin = "<!-- BEGIN GENERATED DIAGRAM: go test ./statemachine -update -->\n"
	readmeEnd   = "<!-- END GENERATED DIAGRAM -->\n"
)

func TestReadmeDiagramIsCurrent(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatalf("read README.md: %v", err)
	}
	text := string(raw)
	begin := strings.Index(text, readmeBegin)
	end := strings.Index(text, readmeEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README.md lacks the markers %q and %q", readmeBegin, readmeEnd)
	}
	var diagram bytes.Buffer
	diagram.WriteString("```mermaid\n")
	if err := statemachine.NewProvisionMachine().WriteMermaid(&diagram); err != nil {
		t.Fatal(err)
	}
	diagram.WriteString("```\n")
	got := text[:begin+len(readmeBegin)] + diagram.String() + text[end:]
	checkGolden(t, "README.md", []byte(got))
}
