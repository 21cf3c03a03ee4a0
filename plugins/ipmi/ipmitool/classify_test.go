package ipmitool

import "testing"

// capturedOutputs are what ipmitool 1.8.19 printed (stderr then stdout,
// with -v as the client passes it) against Debian's ipmi_sim 2.0.33,
// captured by running it with a wrong password, an unknown user, an
// unsupported cipher suite (-C 17, 4, 9 on a BMC with suites 0-3 and 6
// only), a closed port, an unresolvable host name, a command the BMC
// rejects, and a chassis-control hook that sleeps 8 s.
var capturedOutputs = []struct {
	name   string
	output string
	killed bool
	want   Failure
	line   string
}{
	{"lanplus wrong password", "Loading IANA PEN Registry...\n> RAKP 2 HMAC is invalid\nError: Unable to establish IPMI v2 / RMCP+ session\n",
		false, FailAuth, "RAKP 2 HMAC is invalid"},
	{"lanplus unknown user", "Loading IANA PEN Registry...\nRAKP 2 message indicates an error : unauthorized name\nError: Unable to establish IPMI v2 / RMCP+ session\n",
		false, FailAuth, "RAKP 2 message indicates an error : unauthorized name"},
	{"lan wrong password", "Loading IANA PEN Registry...\nActivate Session command failed\nError: Unable to establish LAN session\nError: Unable to establish IPMI v1.5 / RMCP session\n",
		false, FailAuth, "Activate Session command failed"},
	{"lan unknown user", "Loading IANA PEN Registry...\nInvalid user name\nError: Unable to establish LAN session\nError: Unable to establish IPMI v1.5 / RMCP session\n",
		false, FailAuth, "Invalid user name"},
	{"cipher 17 unsupported", "Loading IANA PEN Registry...\nError in open session response message : invalid authentication algorithm\n\nError: Unable to establish IPMI v2 / RMCP+ session\n",
		false, FailCipher, "Error in open session response message : invalid authentication algorithm"},
	{"cipher 4 unsupported", "Error in open session response message : invalid confidentiality algorithm\n\nError: Unable to establish IPMI v2 / RMCP+ session\n",
		false, FailCipher, "Error in open session response message : invalid confidentiality algorithm"},
	{"lanplus closed port", "Loading IANA PEN Registry...\nGet Auth Capabilities error\nError issuing Get Channel Authentication Capabilities request\nError: Unable to establish IPMI v2 / RMCP+ session\n",
		false, FailNoAnswer, "Get Auth Capabilities error"},
	{"lan closed port", "Loading IANA PEN Registry...\nGet Auth Capabilities command failed\nError: Unable to establish LAN session\nError: Unable to establish IPMI v1.5 / RMCP session\n",
		false, FailNoAnswer, "Get Auth Capabilities command failed"},
	{"unresolvable host", "Loading IANA PEN Registry...\nAddress lookup for nonexistent.invalid failed\nCould not open socket!\nError: Unable to establish IPMI v2 / RMCP+ session\n",
		false, FailNoAnswer, "Address lookup for nonexistent.invalid failed"},
	{"killed while waiting", "Loading IANA PEN Registry...\n", true, FailNoAnswer, ""},
	{"rejected command", "Loading IANA PEN Registry...\nRunning Get VSO Capabilities my_addr 0x20, transit 0, target 0x20\nInvalid completion code received: Invalid command\nDiscovered IPMB address 0x0\nSet Chassis Power Control to Diag failed: Invalid data field in request\n",
		false, FailCommand, ""},
	{"unsupported raw command", "Loading IANA PEN Registry...\nRAW REQ (channel=0x0 netfn=0x6 lun=0x0 cmd=0x99 data_len=0)\nUnable to send RAW command (channel=0x0 netfn=0x6 lun=0x0 cmd=0x99 rsp=0xc1): Invalid command\n",
		false, FailCommand, ""},
	// A BMC whose chassis control hangs: the session works, the command
	// gets no answer (ipmitool gives up after -N 2) or the call is
	// stopped at the deadline first. Neither is an unreachable BMC.
	{"command unanswered", "Loading IANA PEN Registry...\nRunning Get VSO Capabilities my_addr 0x20, transit 0, target 0x20\nInvalid completion code received: Invalid command\nDiscovered IPMB address 0x0\nUnable to get Chassis Power Status\nClose Session command failed\n",
		false, FailCommand, ""},
	{"killed after the session", "Loading IANA PEN Registry...\nRunning Get VSO Capabilities my_addr 0x20, transit 0, target 0x20\nInvalid completion code received: Invalid command\nDiscovered IPMB address 0x0\n",
		true, FailCommand, "the session was established, then the BMC did not answer in time"},
	// Not captured (ipmi_sim never answers so): Ironic's retryable text.
	{"busy", "Error in open session response message : insufficient resources for session\n", false, FailBusy, "Error in open session response message : insufficient resources for session"},
}

// The wrong password of the issue: without -v ipmitool prints the same
// single line for it as for a silent BMC, so it is a command failure.
// With -v (always passed now) the lines above tell them apart.
func TestClassify(t *testing.T) {
	for _, tc := range capturedOutputs {
		t.Run(tc.name, func(t *testing.T) {
			got, line := Classify(tc.output, tc.killed)
			if got != tc.want || line != tc.line {
				t.Fatalf("Classify = %v %q, want %v %q", got, line, tc.want, tc.line)
			}
		})
	}
	if got, _ := Classify("Error: Unable to establish IPMI v2 / RMCP+ session\n", false); got != FailCommand {
		t.Fatalf("the line shared by every session failure alone must not decide: %v", got)
	}
}

func TestQuiet(t *testing.T) {
	got := quiet("Loading IANA PEN Registry...\nRunning Get VSO Capabilities my_addr 0x20, transit 0, target 0x20\n\nInvalid completion code received: Invalid command\nDiscovered IPMB address 0x0\nSet Chassis Power Control to Diag failed: Invalid data field in request\n")
	if got != "Set Chassis Power Control to Diag failed: Invalid data field in request" {
		t.Fatalf("quiet = %q", got)
	}
}
