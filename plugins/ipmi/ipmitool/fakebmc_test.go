package ipmitool

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBMC stands in for ipmitool and the BMC behind it (Options.Run). It
// is as strict as the real pair: it refuses a password on the command
// line (ipmitool would show it to every local user), answers only with
// the texts ipmitool 1.8.19 printed against ipmi_sim (capturedOutputs),
// refuses the cipher suites ipmi_sim lacks, and a silent BMC makes the
// attempt last as long as ipmitool would (twice -N), or until it is
// killed.
type fakeBMC struct {
	mu       sync.Mutex
	user     string
	password string
	suites   []string // cipher suites the BMC supports
	guid     []byte   // nil: Get System GUID unsupported
	power    bool
	silent   bool          // nothing answers
	perWait  time.Duration // how long one -N second lasts for a silent BMC (scaled down in tests)
	busy     int           // answers "insufficient resources" this many times first
	attempts int
	commands []string // commands run inside an established session
	// chassisFault names the "chassis status" flags that read true
	// ("Cooling/Fan Fault", ...); sdr is the "sdr elist full" output,
	// "" for ipmi_sim's empty repository.
	chassisFault []string
	sdr          string
	t            *testing.T
}

func newFakeBMC(t *testing.T) *fakeBMC {
	return &fakeBMC{t: t, user: "admin", password: "s3cret-pw", suites: []string{"0", "1", "2", "3", "6"},
		guid: mustHex("a1b2c3d4e5f600000000000000004222"), perWait: 10 * time.Millisecond}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func (f *fakeBMC) opts() Options {
	return Options{Run: f.run, PollInterval: time.Millisecond, PowerTimeout: time.Second, RetryTimeout: time.Second, MinCommandInterval: 20 * time.Millisecond}
}

func (f *fakeBMC) ran() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

var errExit1 = errors.New("exit status 1")

const sessionFailed = "Error: Unable to establish IPMI v2 / RMCP+ session\n"

func (f *fakeBMC) run(ctx context.Context, _ string, args, env []string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	opt := map[string]string{}
	var command []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-I", "-H", "-L", "-p", "-U", "-R", "-N", "-C":
			if i+1 >= len(args) {
				f.t.Errorf("ipmitool: %s without a value in %q", a, args)
				return "", "option requires an argument", errExit1
			}
			opt[a] = args[i+1]
			i++
		case "-E", "-v":
			opt[a] = "set"
		case "-P", "-f", "-k", "-y":
			f.t.Errorf("a secret on ipmitool's command line: %q", args)
			return "", "refused", errExit1
		default:
			command = args[i:]
			i = len(args)
		}
	}
	pw := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "IPMITOOL_PASSWORD="); ok {
			pw = v
		}
	}
	if opt["-E"] == "" || opt["-v"] == "" || opt["-R"] != "1" {
		f.t.Errorf("want -E, -v and -R 1, got %q", args)
	}
	for _, e := range env {
		if strings.Contains(e, f.password) && !strings.HasPrefix(e, "IPMITOOL_PASSWORD=") {
			f.t.Errorf("password in %q", e)
		}
	}
	stderr := "Loading IANA PEN Registry...\n"
	if f.silent {
		n := 2
		fmt.Sscan(opt["-N"], &n)
		f.mu.Unlock()
		select { // ipmitool asks twice, waiting -N seconds each time
		case <-time.After(2 * time.Duration(n) * f.perWait):
		case <-ctx.Done():
		}
		f.mu.Lock()
		if ctx.Err() != nil {
			return "", stderr, errors.New("signal: killed")
		}
		return "", stderr + "Get Auth Capabilities error\nError issuing Get Channel Authentication Capabilities request\n" + sessionFailed, errExit1
	}
	if opt["-I"] == "lanplus" {
		if !slices.Contains(f.suites, opt["-C"]) {
			return "", stderr + "Error in open session response message : invalid authentication algorithm\n\n" + sessionFailed, errExit1
		}
		if f.busy > 0 {
			f.busy--
			return "", stderr + "Error in open session response message : insufficient resources for session\n" + sessionFailed, errExit1
		}
		if opt["-U"] != f.user {
			return "", stderr + "RAKP 2 message indicates an error : unauthorized name\n" + sessionFailed, errExit1
		}
		if pw != f.password {
			return "", stderr + "> RAKP 2 HMAC is invalid\n" + sessionFailed, errExit1
		}
	}
	if len(command) == 2 && command[0] == "exec" { // ipmitool runs each line of the file in this session
		data, err := os.ReadFile(command[1])
		if err != nil {
			return "", stderr + "Unable to open file " + command[1] + "\n", errExit1
		}
		var stdout strings.Builder
		var failed bool
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			o, e, err := f.command(strings.Fields(line))
			stdout.WriteString(o)
			stderr += e
			failed = failed || err != nil
		}
		if failed {
			return stdout.String(), stderr, errExit1
		}
		return stdout.String(), stderr, nil
	}
	o, e, err := f.command(command)
	return o, stderr + e, err
}

// command runs one command inside an established session.
func (f *fakeBMC) command(command []string) (string, string, error) {
	cmd := strings.Join(command, " ")
	f.commands = append(f.commands, cmd)
	stderr := ""
	switch {
	case cmd == "power status":
		return map[bool]string{true: "Chassis Power is on\n", false: "Chassis Power is off\n"}[f.power], stderr, nil
	case cmd == "power on" || cmd == "power off" || cmd == "power soft":
		f.power = cmd == "power on"
		return "Chassis Power Control: " + map[bool]string{true: "Up/On", false: "Down/Off"}[f.power] + "\n", stderr, nil
	case strings.HasPrefix(cmd, "chassis bootdev "):
		return "Set Boot Device to " + command[2] + "\n", stderr, nil
	case cmd == "raw 0x06 0x01": // Get Device ID, as ipmi_sim answers it
		return " 00 03 09 08 02 9f 91 12 00 02 0f 00 00 00 00\n", stderr + "RAW REQ (channel=0x0 netfn=0x6 lun=0x0 cmd=0x1 data_len=0)\nRAW RSP (15 bytes)\n", nil
	case cmd == "chassis status": // as ipmitool 1.8.19 printed it against ipmi_sim
		flag := func(name string) string {
			return map[bool]string{true: "true", false: "false"}[slices.Contains(f.chassisFault, name)]
		}
		return "System Power         : " + map[bool]string{true: "on", false: "off"}[f.power] + "\n" +
			"Power Overload       : " + flag("Power Overload") + "\nPower Interlock      : inactive\n" +
			"Main Power Fault     : " + flag("Main Power Fault") + "\n" +
			"Power Control Fault  : " + flag("Power Control Fault") + "\n" +
			"Power Restore Policy : always-off\nLast Power Event     : \nChassis Intrusion    : inactive\nFront-Panel Lockout  : inactive\n" +
			"Drive Fault          : " + flag("Drive Fault") + "\n" +
			"Cooling/Fan Fault    : " + flag("Cooling/Fan Fault") + "\n", stderr, nil
	case cmd == "sdr elist full":
		if f.sdr == "" {
			return "", stderr + strings.Repeat("Get SDR 0000 command failed: Requested sensor, data, or record not found\n", 5) +
				"SDRR successfully erased\nErr in cmd get sensor sdr info\n", errExit1
		}
		return f.sdr, stderr, nil
	case cmd == "sel clear":
		return "Clearing SEL.  Please allow a few seconds to erase.\n", stderr, nil
	case cmd == "raw 0x06 0x37":
		if f.guid == nil {
			return "", stderr + "RAW REQ (channel=0x0 netfn=0x6 lun=0x0 cmd=0x37 data_len=0)\nUnable to send RAW command (channel=0x0 netfn=0x6 lun=0x0 cmd=0x37 rsp=0xc1): Invalid command\n", errExit1
		}
		var b strings.Builder
		for _, x := range f.guid {
			fmt.Fprintf(&b, " %02x", x)
		}
		return b.String() + "\n", stderr + "RAW REQ (channel=0x0 netfn=0x6 lun=0x0 cmd=0x37 data_len=0)\nRAW RSP (16 bytes)\n", nil
	}
	return "", stderr + "Invalid command\n", errExit1
}
