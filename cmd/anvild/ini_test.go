package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseINI(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		want     []iniValue
		wantLine int
		wantText string
	}{
		{
			name: "sections, both separators, comments, quotes",
			data: "# ironic.conf\n[DEFAULT]\nhost = c1\n; comment\nenabled_hardware_types: ipmi, fake-hardware\n\n[api]\nport=6385\npublic_endpoint = \"http://bm.example:6385\"\n",
			want: []iniValue{
				{"DEFAULT", "host", "c1", 3},
				{"DEFAULT", "enabled_hardware_types", "ipmi, fake-hardware", 5},
				{"api", "port", "6385", 8},
				{"api", "public_endpoint", "http://bm.example:6385", 9},
			},
		},
		{
			name: "continuation lines and an empty value",
			data: "[DEFAULT]\nenabled_hardware_types =\n  ipmi,\n  redfish\nhost =\n",
			want: []iniValue{{"DEFAULT", "enabled_hardware_types", "ipmi,\nredfish", 2}, {"DEFAULT", "host", "", 5}},
		},
		{name: "option before a section", data: "host = x\n", wantLine: 1, wantText: "option before any [section]"},
		{name: "unterminated header", data: "[api\n", wantLine: 1, wantText: "without a closing ]"},
		{name: "empty header", data: "[ ]\n", wantLine: 1, wantText: "empty section name"},
		{name: "not an option", data: "[api]\njust words\n", wantLine: 2, wantText: "expected [section] or name = value"},
		{name: "indented first line", data: "  x = 1\n", wantLine: 1, wantText: "indented line"},
		{name: "line too long", data: "[api]\nx = " + strings.Repeat("a", 70000) + "\n", wantLine: 2, wantText: "longer than 64 KiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseINI("anvil.conf", []byte(tc.data))
			if tc.wantText != "" {
				var se *ConfigSyntaxError
				if !errors.As(err, &se) || se.Line != tc.wantLine || !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), "anvil.conf") {
					t.Fatalf("err = %v, want line %d %q", err, tc.wantLine, tc.wantText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Values, tc.want) {
				t.Fatalf("values\n got %+v\nwant %+v", f.Values, tc.want)
			}
		})
	}
}

// FuzzParseINI: any input either parses into values that all have a
// section, a name without separators and a line within the input, or
// fails with a *ConfigSyntaxError naming a line within it.
func FuzzParseINI(f *testing.F) {
	for _, s := range []string{"[DEFAULT]\nhost = a\n", "[api]\nport: 6385\n  cont\n", "x\n", "[a\n", "; c\n[b]\nk=\"v\"\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := strings.Count(string(data), "\n") + 1
		ini, err := parseINI("f.conf", data)
		if err != nil {
			var se *ConfigSyntaxError
			if !errors.As(err, &se) || se.Line < 1 || se.Line > lines {
				t.Fatalf("error %v (%T) for %q", err, err, data)
			}
			return
		}
		for _, v := range ini.Values {
			if v.Section == "" || v.Name == "" || strings.ContainsAny(v.Name, "=:\n") || v.Line < 1 || v.Line > lines {
				t.Fatalf("value %+v from %q", v, data)
			}
		}
	})
}
