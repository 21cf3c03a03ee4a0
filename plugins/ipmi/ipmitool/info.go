package ipmitool

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalidInfo is wrapped by every driver_info validation error.
var ErrInvalidInfo = errors.New("invalid driver_info")

// ErrMissingInfo is wrapped (with ErrInvalidInfo) when a required
// property is absent.
var ErrMissingInfo = errors.New("missing driver_info")

// InfoError names the driver_info property that failed validation and
// what was expected. It never carries the password.
type InfoError struct {
	Field    string
	Expected string
	Missing  bool
}

func (e *InfoError) Error() string {
	if e.Missing {
		return fmt.Sprintf("ipmitool: driver_info %s is required: %s", e.Field, e.Expected)
	}
	return fmt.Sprintf("ipmitool: driver_info %s is invalid: expected %s", e.Field, e.Expected)
}

// Is matches ErrInvalidInfo, and ErrMissingInfo for a missing property.
func (e *InfoError) Is(target error) bool {
	return target == ErrInvalidInfo || (e.Missing && target == ErrMissingInfo)
}

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
		{"ipmi_terminal_port", "TCP port on the conductor host for the node's serial-over-LAN console. Optional; only validated here.", false},
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

// ParseInfo validates the ipmi_* keys of driver_info.
func ParseInfo(di map[string]any) (Info, error) {
	info := Info{PrivLevel: "ADMINISTRATOR", ProtocolVersion: "2.0"}
	var err error
	if info.Address, err = str(di, "ipmi_address"); err != nil {
		return info, err
	}
	if info.Address == "" {
		return info, &InfoError{Field: "ipmi_address", Missing: true, Expected: "the BMC's host name or IP address"}
	}
	if strings.ContainsAny(info.Address, " /\\@") || strings.HasPrefix(info.Address, "-") {
		return info, &InfoError{Field: "ipmi_address", Expected: "a host name or IP address"}
	}
	if _, p, err := net.SplitHostPort(info.Address); err == nil {
		return info, &InfoError{Field: "ipmi_address", Expected: "no port in the address (use ipmi_port), got port " + p}
	}
	if info.Port, err = port(di, "ipmi_port"); err != nil {
		return info, err
	}
	if info.TerminalPort, err = port(di, "ipmi_terminal_port"); err != nil {
		return info, err
	}
	if info.Username, err = str(di, "ipmi_username"); err != nil {
		return info, err
	}
	if info.Password, err = str(di, "ipmi_password"); err != nil {
		return info, &InfoError{Field: "ipmi_password", Expected: "a string"}
	}
	if len(info.Password) > 20 {
		return info, &InfoError{Field: "ipmi_password", Expected: "at most 20 characters (the IPMI limit)"}
	}
	if pl, err := str(di, "ipmi_priv_level"); err != nil {
		return info, err
	} else if pl != "" {
		info.PrivLevel = strings.ToUpper(pl)
		if !contains(privLevels, info.PrivLevel) {
			return info, &InfoError{Field: "ipmi_priv_level", Expected: "one of " + strings.Join(privLevels, ", ")}
		}
	}
	if pv, err := str(di, "ipmi_protocol_version"); err != nil {
		return info, err
	} else if pv != "" {
		if pv != "2.0" && pv != "1.5" {
			return info, &InfoError{Field: "ipmi_protocol_version", Expected: `"1.5" or "2.0"`}
		}
		info.ProtocolVersion = pv
	}
	if cs, err := str(di, "ipmi_cipher_suite"); err != nil {
		return info, err
	} else if cs != "" {
		n, err := strconv.Atoi(cs)
		if err != nil || n < 0 || n > 17 {
			return info, &InfoError{Field: "ipmi_cipher_suite", Expected: "a cipher suite number between 0 and 17"}
		}
		if info.ProtocolVersion != "2.0" {
			return info, &InfoError{Field: "ipmi_cipher_suite", Expected: "no cipher suite with ipmi_protocol_version 1.5"}
		}
		info.CipherSuite = strconv.Itoa(n)
	}
	return info, nil
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// str reads a string property; whole numbers are accepted and formatted,
// since JSON clients often send ports and suites as numbers.
func str(di map[string]any, key string) (string, error) {
	switch v := di[key].(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(v), nil
	case float64:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10), nil
		}
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", &InfoError{Field: key, Expected: "a string"}
}

func port(di map[string]any, key string) (int, error) {
	s, err := str(di, key)
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, &InfoError{Field: key, Expected: "a port number between 1 and 65535"}
	}
	return n, nil
}
