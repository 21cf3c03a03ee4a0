package rfdriver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/driver"
)

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

// ParseInfo validates the redfish_* keys of driver_info read through r
// (driver.ReadDriverInfo(task, kind, impl)). It reads every key and
// returns r.Err(): a *driver.MissingParameterError listing every missing
// key, or a *driver.InvalidParameterError naming the node, the key and
// what was expected, never a password.
func ParseInfo(r *driver.InfoReader) (Info, error) {
	info := Info{VerifyCA: true, AuthType: AuthAuto}
	if addr := r.String("redfish_address", true); addr != "" {
		info.Endpoint = parseAddress(r, addr)
	}
	info.SystemID = r.String("redfish_system_id", false)
	if info.SystemID != "" && !strings.HasPrefix(info.SystemID, "/") && strings.ContainsAny(info.SystemID, "/?#") {
		r.Invalid("redfish_system_id", "a resource path starting with / (such as /redfish/v1/Systems/1) or a system Id (such as 1)")
	}
	info.SystemID = strings.TrimSuffix(info.SystemID, "/")
	info.Username = r.String("redfish_username", false)
	info.Password = r.String("redfish_password", false)
	if info.Password != "" && !r.Has("redfish_username") {
		r.Missing("redfish_username", "a user name to go with redfish_password")
	}

	switch v := r.Value("redfish_verify_ca").(type) {
	case nil:
	case bool:
		info.VerifyCA = v
	case string:
		if strings.TrimSpace(v) == "" {
			break
		}
		if b, ok := driver.ParseBool(v); ok {
			info.VerifyCA = b
			break
		}
		if _, err := os.Stat(v); err != nil {
			r.Invalid("redfish_verify_ca", "a boolean or the path of an existing CA bundle file or directory")
			break
		}
		info.CAPath = v
	default:
		r.Invalid("redfish_verify_ca", "a boolean or a path")
	}

	info.AuthType = AuthType(r.OneOf("redfish_auth_type", string(AuthAuto), string(AuthBasic), string(AuthSession), string(AuthAuto)))
	return info, r.Err()
}

// parseAddress turns redfish_address (host, host:port or URL) into
// scheme://host[:port][/prefix], recording what is wrong with it in r.
// A bare IPv6 literal ("fd00::9") is taken as the host, in brackets.
func parseAddress(r *driver.InfoReader, addr string) string {
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && a.Zone() == "" {
		addr = "[" + addr + "]"
	}
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	_, rest, _ := strings.Cut(addr, "://")
	if host, _, _ := strings.Cut(rest, "/"); strings.Count(host, ":") > 1 && !strings.HasPrefix(host, "[") {
		r.Invalid("redfish_address", "an IPv6 address with a port goes in brackets: [fd00::9]:8000")
		return ""
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil || u.Host == "":
		r.Invalid("redfish_address", "a host, host:port or http(s) URL")
		return ""
	case u.Scheme != "http" && u.Scheme != "https":
		r.Invalid("redfish_address", "scheme http or https, got "+strconv.Quote(u.Scheme))
		return ""
	case u.User != nil:
		r.Invalid("redfish_address", "no credentials in the URL (use redfish_username and redfish_password)")
		return ""
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			r.Invalid("redfish_address", "a port between 1 and 65535")
			return ""
		}
	}
	return u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
}
