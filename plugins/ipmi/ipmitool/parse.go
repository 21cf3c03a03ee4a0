package ipmitool

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// parseBootParam decodes "chassis bootparam get 5". It reads the raw
// data line ("Boot parameter data: 8004000000") rather than ipmitool's
// prose, which differs between versions. Byte 1 holds the flags:
// bit 7 valid, bit 6 persistent, bit 5 EFI; byte 2 bits 5..2 the device.
func parseBootParam(out string) (BootDevice, error) {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "Boot parameter data" {
			continue
		}
		b, err := hex.DecodeString(strings.TrimSpace(v))
		if err != nil || len(b) < 2 {
			return BootDevice{}, &CommandError{Op: "chassis bootparam get 5", Output: strings.TrimSpace(v), Err: errors.New("malformed boot flags")}
		}
		bd := BootDevice{Persistent: b[0]&0x40 != 0, EFI: b[0]&0x20 != 0}
		switch (b[1] >> 2) & 0x0f {
		case 0x1:
			bd.Device = "pxe"
		case 0x2:
			bd.Device = "disk"
		case 0x3:
			bd.Device = "safe"
		case 0x4:
			bd.Device = "diag"
		case 0x5:
			bd.Device = "cdrom"
		case 0x6:
			bd.Device = "bios"
		case 0xf:
			bd.Device = "floppy"
		}
		return bd, nil
	}
	return BootDevice{}, &CommandError{Op: "chassis bootparam get 5", Output: out, Err: errors.New("no boot parameter data in the answer")}
}

// parseRaw decodes the hex bytes ipmitool prints for a raw command.
func parseRaw(out string) ([]byte, error) {
	var b []byte
	for _, f := range strings.Fields(out) {
		v, err := hex.DecodeString(f)
		if err != nil || len(v) != 1 {
			return nil, &CommandError{Op: "raw", Output: out, Err: fmt.Errorf("unexpected byte %q", f)}
		}
		b = append(b, v[0])
	}
	return b, nil
}

// parseSensors reads "sdr elist full" lines:
// "CPU Temp | 30h | ok | 3.1 | 45 degrees C".
func parseSensors(out string) []Sensor {
	var s []Sensor
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 5 {
			continue
		}
		name := strings.TrimSpace(f[0])
		status := strings.TrimSpace(f[2])
		reading := strings.TrimSpace(f[4])
		unit := ""
		if num, rest, ok := strings.Cut(reading, " "); ok {
			reading, unit = num, strings.TrimSpace(rest)
		}
		s = append(s, Sensor{Name: name, Reading: reading, Unit: unit, Status: status})
	}
	return s
}

// isEmptySDR recognises ipmitool's complaints about a BMC with no sensor
// data repository.
func isEmptySDR(out string) bool {
	return strings.Contains(out, "Get SDR 0000 command failed") || strings.Contains(out, "sensor sdr info")
}

// parseChassisStatus reads ipmitool's "chassis status" lines ("Drive
// Fault          : false"). Output without a System Power line is not a
// chassis status.
func parseChassisStatus(out string) (ChassisStatus, error) {
	var st ChassisStatus
	seen := false
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		set := v == "true"
		switch k {
		case "System Power":
			st.PowerOn, seen = v == "on", true
		case "Power Overload":
			st.PowerOverload = set
		case "Main Power Fault":
			st.MainPowerFault = set
		case "Power Control Fault":
			st.PowerControlFault = set
		case "Drive Fault":
			st.DriveFault = set
		case "Cooling/Fan Fault":
			st.CoolingFault = set
		}
	}
	if !seen {
		return ChassisStatus{}, fmt.Errorf("ipmitool: chassis status output has no System Power line: %q", firstBytes(out, 200))
	}
	return st, nil
}

// firstBytes is s cut to at most n bytes, for error messages.
func firstBytes(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
