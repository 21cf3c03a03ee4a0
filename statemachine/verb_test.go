package statemachine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
)

func TestVerbMapping(t *testing.T) {
	cases := []struct {
		in        string
		verb      statemachine.Verb
		event     statemachine.Event
		canonical statemachine.Verb
		minor     int
	}{
		{"active", statemachine.VerbActive, statemachine.EventDeploy, statemachine.VerbActive, 0},
		{"deploy", statemachine.VerbDeploy, statemachine.EventDeploy, statemachine.VerbActive, 73},
		{"rebuild", statemachine.VerbRebuild, statemachine.EventRebuild, statemachine.VerbRebuild, 0},
		{"deleted", statemachine.VerbDeleted, statemachine.EventDelete, statemachine.VerbDeleted, 0},
		{"undeploy", statemachine.VerbUndeploy, statemachine.EventDelete, statemachine.VerbDeleted, 73},
		{"manage", statemachine.VerbManage, statemachine.EventManage, statemachine.VerbManage, 4},
		{"provide", statemachine.VerbProvide, statemachine.EventProvide, statemachine.VerbProvide, 4},
		{"inspect", statemachine.VerbInspect, statemachine.EventInspect, statemachine.VerbInspect, 6},
		{"clean", statemachine.VerbClean, statemachine.EventClean, statemachine.VerbClean, 15},
		{"service", statemachine.VerbService, statemachine.EventService, statemachine.VerbService, 87},
		{"abort", statemachine.VerbAbort, statemachine.EventAbort, statemachine.VerbAbort, 13},
		{"adopt", statemachine.VerbAdopt, statemachine.EventAdopt, statemachine.VerbAdopt, 17},
		{"rescue", statemachine.VerbRescue, statemachine.EventRescue, statemachine.VerbRescue, 38},
		{"unrescue", statemachine.VerbUnrescue, statemachine.EventUnrescue, statemachine.VerbUnrescue, 38},
		{"unhold", statemachine.VerbUnhold, statemachine.EventUnhold, statemachine.VerbUnhold, 85},
	}
	if got := len(statemachine.Verbs()); got != len(cases) {
		t.Fatalf("Verbs() has %d entries, the table %d", got, len(cases))
	}
	m := statemachine.NewProvisionMachine()
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			v, err := statemachine.ParseVerb(c.in)
			if err != nil {
				t.Fatalf("ParseVerb: %v", err)
			}
			if v != c.verb {
				t.Errorf("verb = %q, want %q", v, c.verb)
			}
			if v.Event() != c.event {
				t.Errorf("event = %q, want %q", v.Event(), c.event)
			}
			if v.Canonical() != c.canonical {
				t.Errorf("canonical = %q, want %q", v.Canonical(), c.canonical)
			}
			spec, ok := v.Spec()
			if !ok || spec.MinMicroversion != c.minor {
				t.Errorf("spec = %+v, %v; want min microversion %d", spec, ok, c.minor)
			}
			if !m.HasEvent(v.Event()) {
				t.Errorf("event %q is not registered in the machine", v.Event())
			}
		})
	}
}

func TestVerbMappingMatchesReference(t *testing.T) {
	ref := loadReference(t)
	seen := make(map[string]bool)
	for _, spec := range statemachine.Verbs() {
		seen[string(spec.Verb)] = true
		if want := ref.APITargetToEvent[string(spec.Verb)]; string(spec.Event) != want {
			t.Errorf("verb %q: event %q, reference %q", spec.Verb, spec.Event, want)
		}
		min, ok := ref.APIMinMicroversion[string(spec.Verb)]
		switch {
		case !ok:
			t.Errorf("verb %q missing from the reference's microversion table", spec.Verb)
		case min == nil && spec.MinMicroversion != 0, min != nil && *min != spec.MinMicroversion:
			t.Errorf("verb %q: min microversion %d, reference %v", spec.Verb, spec.MinMicroversion, min)
		}
	}
	for verb := range ref.APITargetToEvent {
		if !seen[verb] {
			t.Errorf("reference verb %q missing from Verbs()", verb)
		}
	}
}

func TestParseVerbRejectsUnknown(t *testing.T) {
	for _, in := range []string{"", "hold", "Active", "available", "delete", " deploy"} {
		v, err := statemachine.ParseVerb(in)
		if err == nil {
			t.Errorf("ParseVerb(%q) = %q, want an error", in, v)
			continue
		}
		var ve *statemachine.VerbError
		if !errors.As(err, &ve) || ve.Verb != in || !errors.Is(err, statemachine.ErrUnknownVerb) {
			t.Errorf("ParseVerb(%q) error = %#v, want *VerbError matching ErrUnknownVerb", in, err)
		}
		if !strings.Contains(err.Error(), "undeploy") {
			t.Errorf("error %q does not list the accepted verbs", err)
		}
	}
	if got := statemachine.Verb("nope").Event(); got != "" {
		t.Errorf("unknown verb event = %q, want empty", got)
	}
	if got := statemachine.Verb("nope").Canonical(); got != "nope" {
		t.Errorf("unknown verb canonical = %q, want unchanged", got)
	}
}

func TestVerbValidate(t *testing.T) {
	cases := []struct {
		verb  statemachine.Verb
		in    statemachine.VerbInput
		field string // empty when valid
	}{
		{statemachine.VerbClean, statemachine.VerbInput{}, "clean_steps"},
		{statemachine.VerbClean, statemachine.VerbInput{Steps: 2}, ""},
		{statemachine.VerbClean, statemachine.VerbInput{Runbook: "rb-1"}, ""},
		{statemachine.VerbService, statemachine.VerbInput{}, "service_steps"},
		{statemachine.VerbService, statemachine.VerbInput{Steps: 1}, ""},
		{statemachine.VerbService, statemachine.VerbInput{Runbook: "rb-2"}, ""},
		{statemachine.VerbRescue, statemachine.VerbInput{}, "rescue_password"},
		{statemachine.VerbRescue, statemachine.VerbInput{Steps: 3}, "rescue_password"},
		{statemachine.VerbRescue, statemachine.VerbInput{RescuePassword: "s3cret-pw"}, ""},
		{statemachine.VerbActive, statemachine.VerbInput{}, ""},
		{statemachine.VerbDeploy, statemachine.VerbInput{}, ""},
		{statemachine.VerbRebuild, statemachine.VerbInput{}, ""},
		{statemachine.VerbDeleted, statemachine.VerbInput{}, ""},
		{statemachine.VerbUndeploy, statemachine.VerbInput{}, ""},
		{statemachine.VerbManage, statemachine.VerbInput{}, ""},
		{statemachine.VerbProvide, statemachine.VerbInput{}, ""},
		{statemachine.VerbInspect, statemachine.VerbInput{}, ""},
		{statemachine.VerbAbort, statemachine.VerbInput{}, ""},
		{statemachine.VerbAdopt, statemachine.VerbInput{}, ""},
		{statemachine.VerbUnrescue, statemachine.VerbInput{}, ""},
		{statemachine.VerbUnhold, statemachine.VerbInput{}, ""},
	}
	for _, c := range cases {
		err := c.verb.Validate(c.in)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s.Validate(%+v) = %v, want nil", c.verb, c.in, err)
			}
			continue
		}
		var ie *statemachine.InputError
		if !errors.As(err, &ie) || !errors.Is(err, statemachine.ErrMissingInput) {
			t.Errorf("%s.Validate(%+v) = %v, want *InputError", c.verb, c.in, err)
			continue
		}
		if ie.Field != c.field || ie.Verb != c.verb {
			t.Errorf("%s.Validate: error names verb %q field %q, want %q %q", c.verb, ie.Verb, ie.Field, c.verb, c.field)
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("error %q does not name the field %q", err, c.field)
		}
	}
	err := statemachine.Verb("hold").Validate(statemachine.VerbInput{})
	if !errors.Is(err, statemachine.ErrUnknownVerb) {
		t.Errorf("Validate of an unknown verb = %v, want ErrUnknownVerb", err)
	}
}

func TestVerbSpecExplicitTarget(t *testing.T) {
	for _, spec := range statemachine.Verbs() {
		want := statemachine.NoState
		if spec.Verb == statemachine.VerbClean {
			want = statemachine.Manageable
		}
		if spec.ExplicitTarget != want {
			t.Errorf("verb %q: explicit target %q, want %q", spec.Verb, spec.ExplicitTarget, want)
		}
		wantSteps := map[statemachine.Verb]string{statemachine.VerbClean: "clean_steps", statemachine.VerbService: "service_steps"}[spec.Verb]
		if spec.StepsField != wantSteps {
			t.Errorf("verb %q: steps field %q, want %q", spec.Verb, spec.StepsField, wantSteps)
		}
		if spec.NeedsRescuePassword != (spec.Verb == statemachine.VerbRescue) {
			t.Errorf("verb %q: needs rescue password = %v", spec.Verb, spec.NeedsRescuePassword)
		}
	}
}

func TestVerbsIsACopy(t *testing.T) {
	vs := statemachine.Verbs()
	vs[0].Event = "tampered"
	if statemachine.VerbActive.Event() != statemachine.EventDeploy {
		t.Fatal("changing the slice returned by Verbs changed the verb table")
	}
}

func TestPowerStates(t *testing.T) {
	ref := loadReference(t)
	want := map[string]statemachine.PowerState{
		"POWER_ON":       statemachine.PowerOn,
		"POWER_OFF":      statemachine.PowerOff,
		"REBOOT":         statemachine.PowerReboot,
		"SOFT_REBOOT":    statemachine.PowerSoftReboot,
		"SOFT_POWER_OFF": statemachine.PowerSoftOff,
		"NOSTATE":        statemachine.PowerNone,
	}
	for name, value := range ref.PowerStates {
		got, ok := want[name]
		if !ok {
			t.Errorf("reference power state %s has no constant", name)
			continue
		}
		ws := ""
		if value != nil {
			ws = *value
		}
		if string(got) != ws {
			t.Errorf("%s = %q, reference %q", name, got, ws)
		}
	}
	for _, p := range statemachine.PowerTargets() {
		got, err := statemachine.ParsePowerTarget(string(p))
		if err != nil || got != p {
			t.Errorf("ParsePowerTarget(%q) = %q, %v", p, got, err)
		}
	}
	for _, bad := range []string{"", "error", "on", "POWER ON"} {
		_, err := statemachine.ParsePowerTarget(bad)
		var pe *statemachine.PowerStateError
		if !errors.As(err, &pe) || pe.Value != bad || !errors.Is(err, statemachine.ErrUnknownPowerState) {
			t.Errorf("ParsePowerTarget(%q) error = %v, want *PowerStateError", bad, err)
		}
	}
	for _, p := range statemachine.PowerStates() {
		got, err := statemachine.ParsePowerState(string(p))
		if err != nil || got != p {
			t.Errorf("ParsePowerState(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := statemachine.ParsePowerState("off"); !errors.Is(err, statemachine.ErrUnknownPowerState) {
		t.Errorf("ParsePowerState(off) error = %v, want ErrUnknownPowerState", err)
	}
}
