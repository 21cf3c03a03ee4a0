package statemachine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the machine's Definition as indented JSON: the name, the
// initial state, the states with their stable flags and default targets,
// the events, the transitions as [{"from","event","to"}] in declaration
// order, and the sticky-target rules. New accepts the same document back
// (after json.Unmarshal into a Definition).
func (m *Machine) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m.def); err != nil {
		return fmt.Errorf("statemachine: %s: write JSON: %w", m.def.Name, err)
	}
	return nil
}

// WriteDOT writes the machine as a Graphviz digraph. Stable states are drawn
// with a double border, the initial state is marked by an arrow from a
// point, non-stable states show their default target, and each edge is
// labelled with its event.
func (m *Machine) WriteDOT(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "digraph %s {\n", dotQuote(m.def.Name))
	bw.WriteString("  rankdir=LR;\n")
	bw.WriteString("  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n")
	bw.WriteString("  edge [fontname=\"Helvetica\", fontsize=10];\n")
	// The initial marker needs a node name no state uses.
	marker := "__initial"
	for m.Has(State(marker)) {
		marker += "_"
	}
	fmt.Fprintf(bw, "  %s [shape=point, label=\"\"];\n", dotQuote(marker))
	fmt.Fprintf(bw, "  %s -> %s;\n", dotQuote(marker), dotQuote(string(m.def.Initial)))
	for _, s := range m.def.States {
		switch {
		case s.Stable:
			fmt.Fprintf(bw, "  %s [peripheries=2, style=\"rounded,bold\"];\n", dotQuote(string(s.Name)))
		case s.Target != NoState:
			fmt.Fprintf(bw, "  %s [label=%s];\n", dotQuote(string(s.Name)),
				dotQuote(string(s.Name)+"\n(target: "+string(s.Target)+")"))
		default:
			fmt.Fprintf(bw, "  %s;\n", dotQuote(string(s.Name)))
		}
	}
	for _, t := range m.def.Transitions {
		fmt.Fprintf(bw, "  %s -> %s [label=%s];\n", dotQuote(string(t.From)), dotQuote(string(t.To)), dotQuote(string(t.Event)))
	}
	bw.WriteString("}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("statemachine: %s: write DOT: %w", m.def.Name, err)
	}
	return nil
}

// dotQuote returns s as a DOT double-quoted string. Newlines become DOT's
// centred line break.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// WriteMermaid writes the machine as a Mermaid stateDiagram-v2, which
// forges render inline in Markdown. Each state is declared with its exact
// name as label and an identifier made of letters, digits and underscores;
// stable states get the class "stable".
func (m *Machine) WriteMermaid(w io.Writer) error {
	ids := mermaidIDs(m.def.States)
	bw := bufio.NewWriter(w)
	bw.WriteString("stateDiagram-v2\n")
	bw.WriteString("    classDef stable font-weight:bold,stroke-width:3px\n")
	for i, s := range m.def.States {
		fmt.Fprintf(bw, "    state \"%s\" as %s\n", mermaidLabel(string(s.Name)), ids[i])
	}
	fmt.Fprintf(bw, "    [*] --> %s\n", ids[m.stateIndex[m.def.Initial]])
	for _, t := range m.def.Transitions {
		fmt.Fprintf(bw, "    %s --> %s: %s\n", ids[m.stateIndex[t.From]], ids[m.stateIndex[t.To]], mermaidLabel(string(t.Event)))
	}
	var stable []string
	for i, s := range m.def.States {
		if s.Stable {
			stable = append(stable, ids[i])
		}
	}
	if len(stable) > 0 {
		fmt.Fprintf(bw, "    class %s stable\n", strings.Join(stable, ","))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("statemachine: %s: write Mermaid: %w", m.def.Name, err)
	}
	return nil
}

// mermaidIDs derives a unique identifier per state: the name with every
// character outside [A-Za-z0-9] replaced by an underscore, prefixed with
// "s_" so that no identifier can collide with a Mermaid keyword, and
// suffixed with a number (the state's index first) until it is unique.
func mermaidIDs(states []StateSpec) []string {
	ids := make([]string, len(states))
	seen := make(map[string]bool, len(states))
	for i, s := range states {
		var b strings.Builder
		b.WriteString("s_")
		for _, r := range string(s.Name) {
			if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
		id := b.String()
		for n := i; seen[id]; n += len(states) {
			id = fmt.Sprintf("%s_%d", b.String(), n)
		}
		seen[id] = true
		ids[i] = id
	}
	return ids
}

// mermaidLabel makes s safe inside a Mermaid label: double quotes, colons,
// semicolons and hashes are replaced by Mermaid's entity codes and line
// breaks by spaces.
func mermaidLabel(s string) string {
	r := strings.NewReplacer(`#`, "#35;", `"`, "#quot;", ":", "#58;", ";", "#59;", "\n", " ", "\r", " ")
	return r.Replace(s)
}
