package ipmitool

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/driver"
)

// Property describes one driver_info key; the README and the plugin's
// describe answer are generated from these.
type Property struct {
	Name        string
	Description string
	Required    bool
}

// Privilege levels accepted for ipmi_priv_level.
var privLevels = []string{"ADMINISTRATOR", "CALLBACK", "OPERATOR", "USER"}

// Properties returns the driver_info properties of the ipmi hardware
// type, sorted by name.
func Properties() []Property {
	p := []Property{
		{"ipmi_address", "Host name or IP address of the node's BMC.", true},
		{"ipmi_port", "UDP port of the BMC's RMCP service. Optional; ipmitool's default (623) when unset.", false},
		{"ipmi_username", "User name on the BMC. Optional; an anonymous (null) user when unset.", false},
		{"ipmi_password", "Password of ipmi_username. Passed to ipmitool through its environment, never on the command line, and never logged or returned.", false},
		{"ipmi_priv_level", "Privilege level to request for the session: ADMINISTRATOR (default), CALLBACK, OPERATOR or USER.", false},
		{"ipmi_protocol_version", "IPMI protocol version: \"2.0\" (default, the lanplus interface) or \"1.5\" (the lan interface).", false},
		{"ipmi_cipher_suite", "Cipher suite number for IPMI 2.0 sessions, such as 3 or 17. Optional; when unset suite 3 is tried, then 17 if the BMC refuses suite 3's algorithms.", false},
		{"ipmi_terminal_port", "TCP port on the conductor host for the node's serial-over-LAN console (console interface ipmitool-socat). Optional; when unset the conductor picks one from its console port range.", false},
	}
	sort.Slice(p, func(i, j int) bool { return p[i].Name < p[j].Name })
	return p
}

// Info is validated driver_info. String hides the password.
type Info struct {
	Address         string
	Port            int // 0 means ipmitool's default
	Username        string
	Password        string
	PrivLevel       string // ADMINISTRATOR, CALLBACK, OPERATOR or USER
	ProtocolVersion string // "2.0" or "1.5"
	CipherSuite     string // empty means negotiate
	TerminalPort    int
}

// String describes the Info without its password.
func (i Info) String() string {
	return fmt.Sprintf("ipmi %s port=%d user=%q priv=%s protocol=%s cipher=%q", i.Address, i.Port, i.Username, i.PrivLevel, i.ProtocolVersion, i.CipherSuite)
}

// ParseInfo validates the ipmi_* keys of driver_info read through r
// (driver.ReadDriverInfo(task, kind, ImplIPMITool)). It reads every key
// and returns r.Err(): a *driver.MissingParameterError or a
// *driver.InvalidParameterError naming the node, the key and what was
// expected, never the password.
func ParseInfo(r *driver.InfoReader) (Info, error) {
	info := Info{}
	info.Address = r.String("ipmi_address", true)
	if inner, ok := strings.CutPrefix(info.Address, "["); ok && strings.HasSuffix(inner, "]") {
		// An IPv6 literal in brackets, as URLs write it: ipmitool's -H
		// takes the bare address.
		inner = strings.TrimSuffix(inner, "]")
		if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
			info.Address = inner
		} else {
			r.Invalid("ipmi_address", "an IPv6 address inside the brackets, got "+strconv.Quote(info.Address))
		}
	}
	switch {
	case info.Address == "":
	case strings.ContainsAny(info.Address, " /\\@") || strings.HasPrefix(info.Address, "-"):
		r.Invalid("ipmi_address", "a host name or IP address")
	default:
		if _, p, err := net.SplitHostPort(info.Address); err == nil {
			r.Invalid("ipmi_address", "no port in the address (use ipmi_port), got port "+p)
		}
	}
	info.Port = r.Port("ipmi_port", false)
	info.TerminalPort = r.Port("ipmi_terminal_port", false)
	info.Username = r.String("ipmi_username", false)
	info.Password = r.String("ipmi_password", false)
	if len(info.Password) > 20 {
		r.Invalid("ipmi_password", "at most 20 characters (the IPMI limit)")
	}
	info.PrivLevel = r.OneOf("ipmi_priv_level", "ADMINISTRATOR", privLevels...)
	info.ProtocolVersion = r.OneOf("ipmi_protocol_version", "2.0", "1.5", "2.0")
	if n, ok := r.Int("ipmi_cipher_suite", false, 0, 17); ok {
		if info.ProtocolVersion != "2.0" {
			r.Invalid("ipmi_cipher_suite", "no cipher suite with ipmi_protocol_version 1.5")
		}
		info.CipherSuite = strconv.Itoa(n)
	}
	return info, r.Err()
}
