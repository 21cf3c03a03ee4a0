package jsonexact

import (
	"encoding/json"
	"math"
	"testing"
)

// TestDecodeKeepsText checks that decoding then encoding gives back the
// text of every number, and that numbers float64 holds exactly stay
// float64.
func TestDecodeKeepsText(t *testing.T) {
	for _, tc := range []struct {
		in        string
		wantFloat bool
	}{
		{"9007199254740993", false},
		{"9007199254740992", true},
		{"1.0", false},
		{"1", true},
		{"-0", true},
		{"2.5", true},
		{"2.50", false},
		{"1e3", false},
		{"1e+21", true},
		{"1e-7", true},
		{"1e400", false},
		{"0.10000000000000001", false},
		{"-9007199254740995", false},
	} {
		var v any
		if err := Decode([]byte(`{"a":[`+tc.in+`]}`), &v); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		n := v.(map[string]any)["a"].([]any)[0]
		if _, isFloat := n.(float64); isFloat != tc.wantFloat {
			t.Errorf("%s decoded as %T, want float64 = %v", tc.in, n, tc.wantFloat)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"a":[` + tc.in + `]}`; string(out) != want {
			t.Errorf("round trip of %s = %s, want %s", tc.in, out, want)
		}
	}
}

// TestFormatFloatMatchesEncodingJSON compares formatFloat with
// encoding/json over a spread of values.
func TestFormatFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 123456789012345678, math.MaxFloat64, math.SmallestNonzeroFloat64, -2.5e-10} {
		b, _ := json.Marshal(f)
		if got := formatFloat(f); got != string(b) {
			t.Errorf("formatFloat(%v) = %s, encoding/json writes %s", f, got, b)
		}
	}
}

func TestUnmarshalRefusesTrailingData(t *testing.T) {
	var v any
	if err := Unmarshal([]byte(`{} {}`), &v); err == nil {
		t.Error("trailing data accepted")
	}
	if err := Unmarshal([]byte(`{"a":1} `), &v); err != nil {
		t.Errorf("trailing space refused: %v", err)
	}
}

// benchDoc is a driver_internal_info of a node in the middle of a clean:
// an agent step cache, a step list with arguments and a few flags.
var benchDoc = []byte(`{"agent_cached_clean_steps":{"deploy":[{"abortable":true,"interface":"deploy","priority":99,"requires_ramdisk":true,"step":"erase_devices_metadata"},{"abortable":true,"interface":"deploy","priority":10,"requires_ramdisk":true,"step":"erase_devices"},{"abortable":true,"interface":"deploy","priority":0,"requires_ramdisk":true,"step":"burnin_cpu"}]},"clean_steps":[{"abortable":true,"args":{"count":9007199254740993,"ratio":1.0,"n":3},"interface":"deploy","priority":99,"step":"erase_devices_metadata"}],"clean_step_index":0,"agent_url":"https://127.0.0.1:9999","agent_last_heartbeat":"2026-12-01T20:36:00.955838","hardware_manager_version":{"generic_hardware_manager":"1.2"}}`)

// BenchmarkDecode and BenchmarkStdUnmarshal compare Decode with
// json.Unmarshal on benchDoc.
func BenchmarkDecode(b *testing.B) {
	for b.Loop() {
		var m map[string]any
		if err := Decode(benchDoc, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdUnmarshal(b *testing.B) {
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(benchDoc, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// SimpleEscape agrees with encoding/json on every two-character escape,
// and refuses the rest.
func TestSimpleEscape(t *testing.T) {
	for c := 0; c < 256; c++ {
		var want string
		jsonErr := json.Unmarshal([]byte(`"\`+string(rune(c))+`"`), &want)
		got, ok := SimpleEscape(byte(c))
		if c == 'u' {
			if ok {
				t.Errorf("\\u: ok, want refused (its hex digits follow)")
			}
			continue
		}
		if ok != (jsonErr == nil) || (ok && string(rune(got)) != want) {
			t.Errorf("\\%q: %q %v, encoding/json %q %v", rune(c), got, ok, want, jsonErr)
		}
	}
}
