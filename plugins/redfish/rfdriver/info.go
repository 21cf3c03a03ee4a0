package rfdriver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalidInfo is wrapped by every driver_info validation error, so
// callers can branch with errors.Is.
var ErrInvalidInfo = errors.New("invalid driver_info")

// ErrMissingInfo is wrapped (together with ErrInvalidInfo) when a required
// driver_info property is absent.
var ErrMissingInfo = errors.New("missing driver_info")

// InfoError names the driver_info property that failed validation and what
// was expected. It never carries a password.
type InfoError struct {
	Field    string
	Expected string
	Missing  bool
}

func (e *InfoError) Error() string {
	if e.Missing {
		return fmt.Sprintf("redfish: driver_info %s is required: %s", e.Field, e.Expected)
	}
	return fmt.Sprintf("redfish: driver_info %s is invalid: expected %s", e.Field, e.Expected)
}

// Is makes errors.Is match ErrInvalidInfo, and ErrMissingInfo for a
// missing property.
func (e *InfoError) Is(target error) bool {
	return target == ErrInvalidInfo || (e.Missing && target == ErrMissingInfo)
}

// AuthType selects how the driver authenticates to the BMC.
type AuthType string

// The authentication types Ironic accepts for redfish_auth_type.
const (
	AuthBasic   AuthType = "basic"
	AuthSession AuthType = "session"
	AuthAuto    AuthType = "auto"
)

// Property describes one driver_info key: the text the README and the
// plugin's describe answer are generated from.
type Property struct {
	Name        string
	Description string
	Required    bool
}

// Properties returns the driver_info properties of the redfish hardware
// type, sorted by name.
func Properties() []Property {
	p := []Property{
		{"redfish_address", "Where the BMC's Redfish service listens: host, host:port or a URL. The scheme defaults to https when left out; a path, if given, is kept as the prefix of every request.", true},
		{"redfish_system_id", "The ComputerSystem to manage, by resource path (/redfish/v1/Systems/1) or by Id (1). Needed only when the BMC manages more than one system; otherwise the only one is used. Each node resolves its own system, also when several nodes share one BMC (and its session).", false},
		{"redfish_username", "User name to authenticate to the BMC with.", false},
		{"redfish_password", "Password of redfish_username. Never logged or returned.", false},
		{"redfish_verify_ca", "Whether to verify the BMC's TLS certificate: true (default), false, or the path of a CA bundle file or a directory of PEM certificates to trust.", false},
		{"redfish_auth_type", "How to authenticate: \"basic\" (HTTP Basic on every request), \"session\" (one Redfish session per BMC, reused and logged out) or \"auto\" (session, falling back to basic when the BMC offers no session service). Default auto.", false},
	}
	sort.Slice(p, func(i, j int) bool { return p[i].Name < p[j].Name })
	return p
}

// Info is validated driver_info for one node. Its String method hides the
// password.
type Info struct {
	// Endpoint is scheme://host[:port][/prefix], without a trailing slash.
	Endpoint string
	// SystemID is the ComputerSystem path (starting with /) or Id, or
	// empty to pick the only one. It is resolved per node: it is not part
	// of the connection, which nodes on one BMC share.
	SystemID string
	Username string
	Password string
	// VerifyCA tells whether to check the certificate; CAPath, when set,
	// is the bundle or directory to trust instead of the system pool.
	VerifyCA bool
	CAPath   string
	AuthType AuthType
}

// String describes the Info without its password.
func (i Info) String() string {
	return fmt.Sprintf("redfish %s system=%q user=%q auth=%s verify_ca=%t", i.Endpoint, i.SystemID, i.Username, i.AuthType, i.VerifyCA)
}

// key identifies the BMC connection Info needs: nodes sharing a BMC and
// credentials share one session, and everything that changes what a
// connection is (address, user, password, authentication type, TLS
// verification and CA) is part of it. The password enters only as an
// HMAC under salt (a per-pool random secret), so a key that reached a log
// or a heap dump would not give the password away. SystemID is left out
// on purpose: it is resolved per node on the shared connection.
func (i Info) key(salt []byte) string {
	mac := hmac.New(sha256.New, salt)
	mac.Write([]byte(i.Password))
	return strings.Join([]string{i.Endpoint, i.Username, hex.EncodeToString(mac.Sum(nil)), string(i.AuthType), strconv.FormatBool(i.VerifyCA), i.CAPath}, "\x00")
}

// ParseInfo validates the redfish_* keys of driver_info.
func ParseInfo(di map[string]any) (Info, error) {
	info := Info{VerifyCA: true, AuthType: AuthAuto}
	addr, err := str(di, "redfish_address")
	if err != nil {
		return info, err
	}
	if addr == "" {
		return info, &InfoError{Field: "redfish_address", Missing: true, Expected: "the BMC's Redfish address (host, host:port or URL)"}
	}
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return info, &InfoError{Field: "redfish_address", Expected: "a host, host:port or http(s) URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return info, &InfoError{Field: "redfish_address", Expected: "scheme http or https, got " + strconv.Quote(u.Scheme)}
	}
	if u.User != nil {
		return info, &InfoError{Field: "redfish_address", Expected: "no credentials in the URL (use redfish_username and redfish_password)"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return info, &InfoError{Field: "redfish_address", Expected: "a port between 1 and 65535"}
		}
	}
	info.Endpoint = u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")

	if info.SystemID, err = str(di, "redfish_system_id"); err != nil {
		return info, err
	}
	if info.SystemID != "" && !strings.HasPrefix(info.SystemID, "/") && strings.ContainsAny(info.SystemID, "/?#") {
		return info, &InfoError{Field: "redfish_system_id", Expected: "a resource path starting with / (such as /redfish/v1/Systems/1) or a system Id (such as 1)"}
	}
	info.SystemID = strings.TrimSuffix(info.SystemID, "/")
	if info.Username, err = str(di, "redfish_username"); err != nil {
		return info, err
	}
	if info.Password, err = str(di, "redfish_password"); err != nil {
		return info, &InfoError{Field: "redfish_password", Expected: "a string"}
	}
	if info.Password != "" && info.Username == "" {
		return info, &InfoError{Field: "redfish_username", Missing: true, Expected: "a user name to go with redfish_password"}
	}

	switch v := di["redfish_verify_ca"].(type) {
	case nil:
	case bool:
		info.VerifyCA = v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "yes", "1", "on", "":
		case "false", "no", "0", "off":
			info.VerifyCA = false
		default:
			if _, err := os.Stat(v); err != nil {
				return info, &InfoError{Field: "redfish_verify_ca", Expected: "a boolean or the path of an existing CA bundle file or directory"}
			}
			info.CAPath = v
		}
	default:
		return info, &InfoError{Field: "redfish_verify_ca", Expected: "a boolean or a path"}
	}

	at, err := str(di, "redfish_auth_type")
	if err != nil {
		return info, err
	}
	switch AuthType(strings.ToLower(at)) {
	case "":
	case AuthBasic, AuthSession, AuthAuto:
		info.AuthType = AuthType(strings.ToLower(at))
	default:
		return info, &InfoError{Field: "redfish_auth_type", Expected: `one of "basic", "session", "auto"`}
	}
	return info, nil
}

func str(di map[string]any, key string) (string, error) {
	switch v := di[key].(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(v), nil
	default:
		return "", &InfoError{Field: key, Expected: "a string"}
	}
}
