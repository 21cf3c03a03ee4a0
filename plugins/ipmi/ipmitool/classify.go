package ipmitool

import (
	"regexp"
	"strings"
)

// Failure says why an ipmitool invocation failed, as read from what
// ipmitool printed. It decides whether the call is retried.
type Failure int

// The failure classes.
const (
	// FailCommand is a failure after the session was established: the
	// BMC answered the request with an error (an unsupported command, a
	// bad parameter). It is not retried.
	FailCommand Failure = iota
	// FailAuth means the BMC refused the credentials: RAKP 2 carried a
	// bad HMAC (wrong password) or the status "unauthorized name" (no such
	// user), or an IPMI 1.5 session was refused. It is not retried.
	FailAuth
	// FailCipher means the BMC does not support the requested cipher
	// suite (an algorithm the open session request proposed). The next
	// suite is tried when the suite is negotiated, otherwise it is final.
	FailCipher
	// FailNoAnswer means nothing answered the session's first request
	// (Get Channel Authentication Capabilities) or the address did not
	// resolve. It is retried within Options.RetryTimeout.
	FailNoAnswer
	// FailBusy is one of the transient answers Ironic retries (the BMC
	// has no free session, is busy or initialising). It is retried
	// within Options.RetryTimeout.
	FailBusy
)

func (f Failure) String() string {
	switch f {
	case FailAuth:
		return "authentication"
	case FailCipher:
		return "cipher suite"
	case FailNoAnswer:
		return "no answer"
	case FailBusy:
		return "busy"
	}
	return "command"
}

// retryable reports whether a call failing this way is tried again.
func (f Failure) retryable() bool { return f == FailNoAnswer || f == FailBusy }

// The texts below are what ipmitool 1.8.19 prints (with -v, which the
// client always passes so that the RAKP outcome is printed) when a session
// cannot be established; the unit tests hold the full outputs captured
// against ipmi_sim. Without -v a wrong password, an unknown user and a
// silent BMC all print only "Unable to establish IPMI v2 / RMCP+
// session", which is why the three could not be told apart before.
var (
	// authTexts: lanplus with a wrong password ("RAKP 2 HMAC is invalid",
	// or RAKP 4 on BMCs that check the client's HMAC first), with an
	// unknown user or a privilege the user lacks (a RAKP status), and the
	// IPMI 1.5 (lan) equivalents: the BMC drops an Activate Session whose
	// auth code is wrong, or names the user unknown.
	authRe = regexp.MustCompile(`RAKP [1-4] HMAC is invalid` +
		`|RAKP [1-4] message indicates an error : (unauthorized name|invalid integrity check value|unauthorized role or privilege level requested|invalid role)` +
		`|Activate Session command failed|Invalid user name`)
	// cipherRe: the BMC refused an algorithm of the proposed suite in
	// the open session response.
	cipherRe = regexp.MustCompile(`open session response message : (invalid (authentication|integrity|confidentiality) algorithm|no matching|no cipher suite match)` +
		`|Unsupported cipher suite`)
	// noAnswerRe: the session's first request was never answered, or
	// the host name did not resolve.
	noAnswerRe = regexp.MustCompile(`Get Auth Capabilities (error|command failed)` +
		`|Error issuing Get Channel Authentication Capabilities request` +
		`|No response from remote controller|Address lookup for \S+ failed|Could not open socket`)
	// busyTexts are Ironic's IPMITOOL_RETRYABLE_FAILURES.
	busyTexts = []string{"insufficient resource", "Node busy", "Timeout", "Out of space", "BMC initialization in progress"}
)

// Classify reads what a failed ipmitool invocation printed (stderr and
// stdout) and says why it failed, with the line that says so (or "" for a
// command failure, whose text is the whole output). killed reports that
// the invocation was stopped at the deadline: with no other sign it means
// the BMC never answered.
func Classify(output string, killed bool) (Failure, string) {
	for _, c := range []struct {
		re *regexp.Regexp
		f  Failure
	}{{authRe, FailAuth}, {cipherRe, FailCipher}} {
		if m := c.re.FindString(output); m != "" {
			return c.f, lineOf(output, m)
		}
	}
	for _, b := range busyTexts {
		if strings.Contains(output, b) {
			return FailBusy, lineOf(output, b)
		}
	}
	if m := noAnswerRe.FindString(output); m != "" {
		return FailNoAnswer, lineOf(output, m)
	}
	if killed {
		if sessionUpRe.MatchString(output) {
			return FailCommand, "the session was established, then the BMC did not answer in time"
		}
		return FailNoAnswer, ""
	}
	return FailCommand, ""
}

// sessionUpRe matches what -v prints once a session is established
// (ipmitool's IPMB discovery), so that an invocation stopped at the
// deadline after it is not taken for a BMC that never answered.
var sessionUpRe = regexp.MustCompile(`Discovered IPMB address|Running Get VSO Capabilities|Running Get PICMG Properties`)

// lineOf returns the trimmed line of text that contains m.
func lineOf(text, m string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, m) {
			return strings.TrimLeft(strings.TrimSpace(l), "> ")
		}
	}
	return m
}

// verboseNoise are the informational lines -v adds to every invocation;
// they are dropped from the output an error quotes.
var verboseNoise = []string{
	"Loading IANA PEN Registry", "Running Get VSO Capabilities", "Invalid completion code received: Invalid command",
	"Discovered IPMB address", "RAW REQ (", "RAW RSP (",
}

// quiet drops -v's informational lines and blank lines from text.
func quiet(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		noise := false
		for _, n := range verboseNoise {
			if strings.HasPrefix(l, n) {
				noise = true
				break
			}
		}
		if !noise {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
