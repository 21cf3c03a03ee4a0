package statemachine_test

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	sm "github.com/anvilmetal/anvil/statemachine"
)

// awkwardMachine has names that need escaping in every export format.
func awkwardMachine(t *testing.T) *sm.Machine {
	t.Helper()
	m, err := sm.New(sm.Definition{
		Name:    `odd "names"`,
		Initial: "__initial",
		States: []sm.StateSpec{
			{Name: "__initial", Stable: true},
			{Name: `say "hi"`, Stable: true},
			{Name: `back\slash: #1; ok`},
			{Name: "a-b"},
			{Name: "a b"},
			{Name: "état"},
		},
		Events: []sm.Event{`go "now"`, "x:y"},
		Transitions: []sm.Transition{
			{From: "__initial", Event: `go "now"`, To: `say "hi"`},
			{From: `say "hi"`, Event: "x:y", To: `back\slash: #1; ok`},
			{From: `back\slash: #1; ok`, Event: "x:y", To: "a-b"},
			{From: "a-b", Event: "x:y", To: "a b"},
			{From: "a b", Event: "x:y", To: "état"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDOTEscaping(t *testing.T) {
	var buf bytes.Buffer
	if err := awkwardMachine(t).WriteDOT(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		`digraph "odd \"names\"" {`,
		`"__initial_" [shape=point, label=""];`,
		`"__initial_" -> "__initial";`,
		`"say \"hi\"" -> "back\\slash: #1; ok" [label="x:y"];`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT output lacks %s\n%s", want, out)
		}
	}
	if _, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command("dot", "-Tsvg")
		cmd.Stdin = &buf
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("dot -Tsvg rejected the escaped output: %v %s", err, stderr.String())
		}
	}
}

func TestMermaidEscaping(t *testing.T) {
	var buf bytes.Buffer
	if err := awkwardMachine(t).WriteMermaid(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		`state "__initial" as s___initial`,
		`state "say #quot;hi#quot;" as s_say__hi_`,
		`state "back\slash#58; #35;1#59; ok" as s_back_slash___1__ok`,
		`state "a-b" as s_a_b`,
		`state "a b" as s_a_b_4`,
		`state "état" as s__tat`,
		`s_say__hi_ --> s_back_slash___1__ok: x#58;y`,
		`s_a_b --> s_a_b_4: x#58;y`,
		`class s___initial,s_say__hi_ stable`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Mermaid output lacks %s\n%s", want, out)
		}
	}
}

// failingWriter fails every write, to check export errors are reported.
type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestMermaidIDsAreUnique(t *testing.T) {
	// "x y 2" takes s_x_y_2, which the suffixed form of the third state
	// would otherwise reuse.
	m, err := sm.New(sm.Definition{
		Name:        "ids",
		Initial:     "x y 2",
		States:      []sm.StateSpec{{Name: "x y 2", Stable: true}, {Name: "x y", Stable: true}, {Name: "x-y", Stable: true}},
		Events:      []sm.Event{"e"},
		Transitions: []sm.Transition{{From: "x y 2", Event: "e", To: "x-y"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.WriteMermaid(&buf); err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for line := range strings.Lines(buf.String()) {
		if _, id, ok := strings.Cut(strings.TrimSpace(line), " as "); ok {
			if seen[id] {
				t.Errorf("identifier %s used twice:\n%s", id, buf.String())
			}
			seen[id] = true
		}
	}
	if len(seen) != 3 {
		t.Errorf("found %d state identifiers, want 3:\n%s", len(seen), buf.String())
	}
	if !strings.Contains(buf.String(), "s_x_y_2 --> s_x_y_5: e") {
		t.Errorf("transition does not use the unique identifiers:\n%s", buf.String())
	}
}

func TestExportWriteErrors(t *testing.T) {
	m := sm.NewProvisionMachine()
	for name, write := range map[string]func() error{
		"JSON":    func() error { return m.WriteJSON(failingWriter{}) },
		"DOT":     func() error { return m.WriteDOT(failingWriter{}) },
		"Mermaid": func() error { return m.WriteMermaid(failingWriter{}) },
	} {
		err := write()
		if !errors.Is(err, errDiskFull) {
			t.Errorf("%s: error = %v, want it to wrap the writer's error", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "statemachine: ironic-provision: write "+name) {
			t.Errorf("%s: error %q lacks the component prefix", name, err)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	m := sm.NewProvisionMachine()
	_, _, err := m.Apply(sm.Move{State: sm.Available, Event: sm.EventDeploy, ExplicitTarget: sm.Deploying})
	want := `statemachine: ironic-provision: explicit target "deploying": not a stable state; only stable states can be targets`
	if err == nil || err.Error() != want {
		t.Errorf("target error = %v\nwant %s", err, want)
	}
	_, err = sm.ParsePowerTarget("on")
	want = `statemachine: unknown power state "on" (accepted: "power on", "power off", "rebooting", "soft power off", "soft rebooting")`
	if err == nil || err.Error() != want {
		t.Errorf("power error = %v\nwant %s", err, want)
	}
	err = sm.VerbRescue.Validate(sm.VerbInput{})
	want = `statemachine: verb "rescue": rescue_password is required: a non-empty password`
	if err == nil || err.Error() != want {
		t.Errorf("input error = %v\nwant %s", err, want)
	}
	_, err = sm.New(sm.Definition{Initial: "a", States: []sm.StateSpec{{Name: "a"}, {Name: "a"}}})
	want = `statemachine: definition: states[1].name "a": state declared twice`
	if err == nil || err.Error() != want {
		t.Errorf("definition error = %v\nwant %s", err, want)
	}
}

func TestSecretsStayOutOfErrors(t *testing.T) {
	// Validate never sees a problem with a non-empty password, but a
	// missing-steps error on a request carrying one must not echo it.
	err := sm.VerbClean.Validate(sm.VerbInput{RescuePassword: "hunter2-secret"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error = %v; want a missing-steps error without the password", err)
	}
}
