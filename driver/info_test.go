package driver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
)

// TestInfoReader reads one key per case with each getter and checks the
// value and the typed error Err returns: nil, a *MissingParameterError
// naming the key, or an *InvalidParameterError naming the key and what
// was expected.
func TestInfoReader(t *testing.T) {
	type outcome struct {
		value   any
		missing bool
		invalid string // Expected of the *InvalidParameterError
	}
	str := func(req bool) func(*driver.InfoReader) any {
		return func(r *driver.InfoReader) any { return r.String("k", req) }
	}
	num := func(req bool, lo, hi int) func(*driver.InfoReader) any {
		return func(r *driver.InfoReader) any { n, _ := r.Int("k", req, lo, hi); return n }
	}
	port := func(r *driver.InfoReader) any { return r.Port("k", false) }
	boolean := func(def bool) func(*driver.InfoReader) any {
		return func(r *driver.InfoReader) any { return r.Bool("k", def) }
	}
	dur := func(r *driver.InfoReader) any { return r.Duration("k", 7*time.Second) }
	oneOf := func(r *driver.InfoReader) any { return r.OneOf("k", "auto", "basic", "session", "auto") }
	cases := []struct {
		name  string
		value any // nil: the key is absent
		read  func(*driver.InfoReader) any
		want  outcome
	}{
		{"string", " bmc1 ", str(true), outcome{value: "bmc1"}},
		{"string number", 6230.0, str(true), outcome{value: "", invalid: "a string"}},
		{"string json.Number", json.Number("17"), str(true), outcome{value: "", invalid: "a string"}},
		{"string absent optional", nil, str(false), outcome{value: ""}},
		{"string absent required", nil, str(true), outcome{value: "", missing: true}},
		{"string blank required", "  ", str(true), outcome{value: "", missing: true}},
		{"string fraction", 1.5, str(false), outcome{value: "", invalid: "a string"}},
		{"string bool", true, str(false), outcome{value: "", invalid: "a string"}},
		{"string list", []any{"a"}, str(false), outcome{value: "", invalid: "a string"}},
		{"int number", 3.0, num(false, 0, 17), outcome{value: 3}},
		{"int string", " 17 ", num(false, 0, 17), outcome{value: 17}},
		{"int json.Number", json.Number("4"), num(false, 0, 17), outcome{value: 4}},
		{"int zero is a value", 0.0, num(true, 0, 17), outcome{value: 0}},
		{"int below", -1.0, num(false, 0, 17), outcome{value: 0, invalid: "a whole number between 0 and 17"}},
		{"int above", "18", num(false, 0, 17), outcome{value: 0, invalid: "a whole number between 0 and 17"}},
		{"int fraction", 2.5, num(false, 0, 17), outcome{value: 0, invalid: "a whole number between 0 and 17"}},
		{"int word", "three", num(false, 0, 17), outcome{value: 0, invalid: "a whole number between 0 and 17"}},
		{"int absent required", nil, num(true, 0, 17), outcome{value: 0, missing: true}},
		{"port", "623", port, outcome{value: 623}},
		{"port zero", 0.0, port, outcome{value: 0, invalid: "a port number between 1 and 65535"}},
		{"port too big", 70000.0, port, outcome{value: 0, invalid: "a port number between 1 and 65535"}},
		{"bool json", false, boolean(true), outcome{value: false}},
		{"bool word", "Yes", boolean(false), outcome{value: true}},
		{"bool short word", "f", boolean(true), outcome{value: false}},
		{"bool number", 1.0, boolean(false), outcome{value: true}},
		{"bool absent", nil, boolean(true), outcome{value: true}},
		{"bool word unknown", "maybe", boolean(true), outcome{value: true, invalid: "a boolean (true or false)"}},
		{"bool number two", 2.0, boolean(false), outcome{value: false, invalid: "a boolean (true or false)"}},
		{"duration go", "1m30s", dur, outcome{value: 90 * time.Second}},
		{"duration seconds", 2.5, dur, outcome{value: 2500 * time.Millisecond}},
		{"duration seconds string", "45", dur, outcome{value: 45 * time.Second}},
		{"duration absent", nil, dur, outcome{value: 7 * time.Second}},
		{"duration negative", "-5s", dur, outcome{value: 7 * time.Second, invalid: "a duration such as 90s or a number of seconds"}},
		{"duration negative seconds", -1.0, dur, outcome{value: 7 * time.Second, invalid: "a duration such as 90s or a number of seconds"}},
		{"duration word", "soon", dur, outcome{value: 7 * time.Second, invalid: "a duration such as 90s or a number of seconds"}},
		{"oneof canonical spelling", "Session", oneOf, outcome{value: "session"}},
		{"oneof absent", nil, oneOf, outcome{value: "auto"}},
		{"oneof unknown", "kerberos", oneOf, outcome{value: "auto", invalid: `one of "basic", "session", "auto"`}},
		{"oneof not a string", false, oneOf, outcome{value: "auto", invalid: `one of "basic", "session", "auto"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if tc.value != nil {
				values["k"] = tc.value
			}
			r := driver.ReadDriverInfo(&driver.Task{NodeUUID: "n1", DriverInfo: values}, driver.KindPower, "x")
			if got := tc.read(r); got != tc.want.value {
				t.Errorf("value = %#v, want %#v", got, tc.want.value)
			}
			err := r.Err()
			var me *driver.MissingParameterError
			var ie *driver.InvalidParameterError
			switch {
			case tc.want.missing:
				if !errors.As(err, &me) || !slices.Equal(me.Missing, []string{"k"}) || me.Node != "n1" || me.Kind != driver.KindPower || me.Impl != "x" || me.Field != "driver_info" || !errors.Is(err, driver.ErrMissingParameter) {
					t.Fatalf("Err = %#v, want a *MissingParameterError on k", err)
				}
			case tc.want.invalid != "":
				if !errors.As(err, &ie) || ie.Key != "k" || ie.Expected != tc.want.invalid || ie.Node != "n1" || ie.Kind != driver.KindPower || ie.Impl != "x" || ie.Field != "driver_info" || !errors.Is(err, driver.ErrInvalidParameter) {
					t.Fatalf("Err = %#v, want an *InvalidParameterError on k expecting %q", err, tc.want.invalid)
				}
			case err != nil:
				t.Fatalf("Err = %v, want nil", err)
			}
		})
	}
}

// TestInfoReaderGathers checks that Err lists every missing key together,
// with hints, in preference to an invalid key, and that only the first
// invalid key is reported.
func TestInfoReaderGathers(t *testing.T) {
	r := driver.NewInfoReader("n1", driver.KindManagement, "x", "instance_info", map[string]any{"p": "nope", "q": "also"})
	r.Port("p", false)
	r.String("a", true)
	r.Int("q", false, 0, 1)
	r.String("b", true)
	r.Missing("c", "needed with q")
	r.String("a", true)
	err := r.Err()
	var me *driver.MissingParameterError
	if !errors.As(err, &me) || !slices.Equal(me.Missing, []string{"a", "b", "c"}) || me.Field != "instance_info" {
		t.Fatalf("Err = %#v, want a, b and c missing from instance_info", err)
	}
	if want := "management/x: node n1 is missing required instance_info: a, b, c (needed with q)"; err.Error() != want {
		t.Fatalf("Err = %q, want %q", err, want)
	}

	r = driver.NewInfoReader("n1", driver.KindManagement, "x", "driver_info", map[string]any{"p": "nope", "q": "also"})
	r.Port("p", false)
	r.Int("q", false, 0, 1)
	var ie *driver.InvalidParameterError
	if err := r.Err(); !errors.As(err, &ie) || ie.Key != "p" {
		t.Fatalf("Err = %v, want the first invalid key p", err)
	}
}

// TestInfoReaderNeverQuotesValues checks that no error text carries the
// value read, so a secret read through the reader stays out of errors.
func TestInfoReaderNeverQuotesValues(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, read := range []func(*driver.InfoReader){
		func(r *driver.InfoReader) { r.Int("k", false, 0, 1) },
		func(r *driver.InfoReader) { r.Port("k", false) },
		func(r *driver.InfoReader) { r.Bool("k", false) },
		func(r *driver.InfoReader) { r.Duration("k", 0) },
		func(r *driver.InfoReader) { r.OneOf("k", "", "a", "b") },
	} {
		r := driver.NewInfoReader("n1", driver.KindPower, "x", "driver_info", map[string]any{"k": secret})
		read(r)
		if err := r.Err(); err == nil || strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%#v", err), secret) {
			t.Fatalf("Err = %v: want an error without the value", err)
		}
	}
}
