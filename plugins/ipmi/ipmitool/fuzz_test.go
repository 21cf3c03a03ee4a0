package ipmitool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// FuzzParseInfo feeds arbitrary driver_info JSON to ParseInfo: no panic,
// only *driver.MissingParameterError or
// *driver.InvalidParameterError failures, never the password in any text, and never an
// address ipmitool could take for an option.
func FuzzParseInfo(f *testing.F) {
	for _, s := range []string{
		`{"ipmi_address":"10.0.0.1","ipmi_port":623,"ipmi_priv_level":"OPERATOR"}`,
		`{"ipmi_address":"bmc","ipmi_cipher_suite":"17","ipmi_protocol_version":"2.0"}`,
		`{"ipmi_address":"-H","ipmi_terminal_port":"x"}`, `{"ipmi_address":"fe80::1"}`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var di map[string]any
		if json.Unmarshal([]byte(raw), &di) != nil {
			return
		}
		di["ipmi_password"] = "FUZZSECRETPW"
		info, err := parseInfo(di)
		if err != nil {
			var me *driver.MissingParameterError
			var ie *driver.InvalidParameterError
			if !errors.As(err, &me) && !errors.As(err, &ie) || strings.Contains(err.Error(), "FUZZSECRETPW") {
				t.Fatalf("bad error %T %v", err, err)
			}
			return
		}
		if info.Address == "" || strings.HasPrefix(info.Address, "-") || strings.Contains(info.String(), "FUZZSECRETPW") {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// FuzzParsers feeds arbitrary ipmitool output to the output parsers.
func FuzzParsers(f *testing.F) {
	f.Add("Boot parameter data: e008000000")
	f.Add(" 00 03 09 08 02")
	f.Add("CPU Temp | 30h | ok | 3.1 | 45 degrees C")
	f.Fuzz(func(t *testing.T, out string) {
		if bd, err := parseBootParam(out); err == nil && bd.Device != "" && !strings.Contains("pxe disk safe diag cdrom bios floppy", bd.Device) {
			t.Fatalf("device %q", bd.Device)
		}
		if b, err := parseRaw(out); err == nil && len(b) != len(strings.Fields(out)) {
			t.Fatalf("raw %x from %q", b, out)
		}
		if f, line := Classify(out, false); f != FailCommand && !strings.Contains(out, line) {
			t.Fatalf("%v line %q not in %q", f, line, out)
		}
		if g, err := formatGUID(out); err == nil && g != "" && len(g) != 36 {
			t.Fatalf("guid %q from %q", g, out)
		}
		for _, s := range parseSensors(out) {
			if strings.Contains(s.Name, "|") {
				t.Fatalf("sensor %+v", s)
			}
		}
	})
}
