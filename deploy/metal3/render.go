package metal3

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Paths the Metal3 Ironic container reads its secrets from, which the
// ironic-deployment's components mount.
const (
	// HTPasswdPath is the htpasswd file of the basic-auth component
	// (Secret ironic-htpasswd mounted at /auth/ironic).
	HTPasswdPath = "/auth/ironic/htpasswd"
	// CertPath and KeyPath are the TLS component's certificate and key
	// (mounted at /certs/ironic).
	CertPath = "/certs/ironic/tls.crt"
	KeyPath  = "/certs/ironic/tls.key"
	// SharedDir is Metal3's shared volume; html under it is what its
	// httpd served at HTTP_PORT (images, ISOs).
	SharedDir = "/shared"
	// StateDir is where the embedded SQLite database lives when no
	// PostgreSQL DSN is given: mount a volume there.
	StateDir = "/var/lib/anvil"
)

// Env is the environment the renderer reads, and the file system it
// checks for the mounted secrets (tests substitute both).
type Env struct {
	Getenv func(string) string
	// Exists reports whether a mounted file is there.
	Exists func(path string) bool
	// InterfaceIP resolves PROVISIONING_INTERFACE to its first address.
	InterfaceIP func(name string) (netip.Addr, error)
}

// OSEnv is the process's environment and file system.
func OSEnv() Env {
	return Env{
		Getenv: os.Getenv,
		Exists: func(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() },
		InterfaceIP: func(name string) (netip.Addr, error) {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return netip.Addr{}, err
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				return netip.Addr{}, err
			}
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLinkLocalUnicast() {
					return p.Addr(), nil
				}
			}
			return netip.Addr{}, fmt.Errorf("interface %s has no usable address", name)
		},
	}
}

// Rendered is anvild's configuration file and what the renderer did not
// carry over (variables that configure parts of Metal3's pod anvild has
// no counterpart of), to be logged.
type Rendered struct {
	INI   string
	Notes []string
}

// VarError is a variable whose value cannot be used.
type VarError struct {
	Name, Value, Expected string
}

func (e *VarError) Error() string {
	return fmt.Sprintf("metal3: %s=%q: expected %s", e.Name, e.Value, e.Expected)
}

// ignored are Metal3 variables with no anvild counterpart, and why.
var ignored = map[string]string{
	"DHCP_RANGE":                       "anvild runs no DHCP server: keep Metal3's dnsmasq container (or an existing DHCP server) for PXE hosts",
	"CACHEURL":                         "the image cache URL is for Metal3's image builder, not Ironic",
	"IRONIC_INSPECTOR_VLAN_INTERFACES": "inspection's VLAN interfaces are a ramdisk parameter; put them in IRONIC_KERNEL_PARAMS (ipa-inspection-vlan-interfaces=...)",
	"USE_IRONIC_INSPECTOR":             "anvild inspects in-band itself (inspect interface agent)",
	"IRONIC_ENDPOINT":                  "that is BMO's variable: point it at this container's API",
}

// Render turns Metal3's Ironic environment into anvild's configuration:
//
//   - the API listens on PROVISIONING_IP (or IRONIC_IP, or the first
//     address of PROVISIONING_INTERFACE; else every address) at
//     IRONIC_LISTEN_PORT, IRONIC_ACCESS_PORT or 6385;
//   - TLS when IRONIC_CERT_FILE and IRONIC_KEY_FILE, or the TLS Secret at
//     /certs/ironic, exist; http_basic when IRONIC_HTPASSWD_FILE or the
//     Secret at /auth/ironic/htpasswd exists, noauth otherwise;
//   - DEPLOY_KERNEL_URL and DEPLOY_RAMDISK_URL are the default deploy
//     kernel and ramdisk, IRONIC_KERNEL_PARAMS the kernel parameters,
//     IRONIC_FAST_TRACK fast track (default true, as Metal3's);
//   - virtual media images are published under /shared/html, served by
//     anvild itself at <IP>:<HTTP_PORT> (default 6180, where Metal3's
//     httpd listened) and reached at IRONIC_EXTERNAL_HTTP_URL, else
//     http://<IP>:<HTTP_PORT>;
//   - the database is ANVIL_DATABASE_CONNECTION (a PostgreSQL DSN: several
//     replicas then share it as conductors of one hash ring), else SQLite
//     under /var/lib/anvil; the conductor's name is ANVIL_HOST, else
//     the pod's host name.
func Render(e Env) (Rendered, error) {
	get := func(k string) string { return strings.TrimSpace(e.Getenv(k)) }
	var r Rendered
	sections := map[string]map[string]string{}
	set := func(sec, k, v string) {
		if sections[sec] == nil {
			sections[sec] = map[string]string{}
		}
		sections[sec][k] = v
	}
	ip := netip.Addr{}
	for _, k := range []string{"PROVISIONING_IP", "IRONIC_IP"} {
		if v := get(k); v != "" {
			a, err := netip.ParseAddr(strings.Trim(v, "[]"))
			if err != nil {
				return Rendered{}, &VarError{k, v, "an IP address"}
			}
			ip = a
			break
		}
	}
	if !ip.IsValid() {
		if ifc := get("PROVISIONING_INTERFACE"); ifc != "" {
			a, err := e.InterfaceIP(ifc)
			if err != nil {
				return Rendered{}, &VarError{"PROVISIONING_INTERFACE", ifc, "an interface with an address (" + err.Error() + ")"}
			}
			ip = a
		}
	}
	if ip.IsValid() {
		set("api", "host_ip", ip.String())
	} else {
		set("api", "host_ip", "0.0.0.0")
		r.Notes = append(r.Notes, "no PROVISIONING_IP, IRONIC_IP or PROVISIONING_INTERFACE: the API listens on every address")
	}
	port := "6385"
	for _, k := range []string{"IRONIC_LISTEN_PORT", "IRONIC_ACCESS_PORT"} {
		if v := get(k); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 65535 {
				return Rendered{}, &VarError{k, v, "a TCP port"}
			}
			port = v
			break
		}
	}
	set("api", "port", port)

	cert, key := get("IRONIC_CERT_FILE"), get("IRONIC_KEY_FILE")
	if cert == "" && key == "" && e.Exists(CertPath) && e.Exists(KeyPath) {
		cert, key = CertPath, KeyPath
	}
	scheme := "http"
	switch {
	case cert != "" && key != "":
		set("api", "enable_ssl_api", "true")
		set("api", "cert_file", cert)
		set("api", "key_file", key)
		scheme = "https"
	case cert != "" || key != "":
		return Rendered{}, &VarError{"IRONIC_CERT_FILE", cert, "set together with IRONIC_KEY_FILE"}
	}
	host := "localhost"
	if ip.IsValid() {
		host = ip.String()
		if ip.Is6() {
			host = "[" + host + "]"
		}
	}
	set("api", "public_endpoint", scheme+"://"+host+":"+port)

	htp := get("IRONIC_HTPASSWD_FILE")
	if htp == "" && e.Exists(HTPasswdPath) {
		htp = HTPasswdPath
	}
	if htp != "" {
		set("DEFAULT", "auth_strategy", "http_basic")
		set("DEFAULT", "http_basic_auth_user_file", htp)
	} else {
		set("DEFAULT", "auth_strategy", "noauth")
		r.Notes = append(r.Notes, "no htpasswd at "+HTPasswdPath+": the API takes no credentials (noauth)")
	}
	if h := get("ANVIL_HOST"); h != "" {
		set("DEFAULT", "host", h)
	}
	set("DEFAULT", "state_path", StateDir)
	if dsn := get("ANVIL_DATABASE_CONNECTION"); dsn != "" {
		if !strings.HasPrefix(dsn, "postgres") && !strings.HasPrefix(dsn, "sqlite") {
			return Rendered{}, &VarError{"ANVIL_DATABASE_CONNECTION", "(hidden)", "a postgresql:// or sqlite:/// DSN"}
		}
		set("database", "connection", dsn)
	}

	for _, kv := range [][2]string{{"DEPLOY_KERNEL_URL", "deploy_kernel"}, {"DEPLOY_RAMDISK_URL", "deploy_ramdisk"}} {
		if v := get(kv[0]); v != "" {
			if u, err := url.Parse(v); err != nil || u.Scheme == "" {
				return Rendered{}, &VarError{kv[0], v, "a URL"}
			}
			set("conductor", kv[1], v)
		}
	}
	if v := get("IRONIC_KERNEL_PARAMS"); v != "" {
		set("pxe", "kernel_append_params", v)
		set("redfish", "kernel_append_params", v)
	}
	fast := "true"
	if v := get("IRONIC_FAST_TRACK"); v != "" {
		switch strings.ToLower(v) {
		case "true", "false":
			fast = strings.ToLower(v)
		default:
			return Rendered{}, &VarError{"IRONIC_FAST_TRACK", v, "true or false"}
		}
	}
	set("deploy", "fast_track", fast)

	hp := get("HTTP_PORT")
	if hp == "" {
		hp = "6180"
	}
	if n, err := strconv.Atoi(hp); err != nil || n <= 0 || n > 65535 {
		return Rendered{}, &VarError{"HTTP_PORT", hp, "a TCP port"}
	}
	httpURL := get("IRONIC_EXTERNAL_HTTP_URL")
	if httpURL == "" {
		httpURL = "http://" + host + ":" + hp
	}
	set("deploy", "http_url", httpURL)
	set("deploy", "http_root", SharedDir+"/html")
	// anvild serves http_root itself, where Metal3's httpd did.
	listen := "0.0.0.0"
	if ip.IsValid() {
		listen = ip.String()
	}
	set("anvil", "http_root_listen", net.JoinHostPort(listen, hp))
	set("anvil", "log_format", "json")

	for k, why := range ignored {
		if get(k) != "" {
			r.Notes = append(r.Notes, k+" not used: "+why)
		}
	}
	sort.Strings(r.Notes)

	var b strings.Builder
	b.WriteString("# Rendered by anvil-metal3 from Metal3's Ironic environment.\n")
	for _, sec := range []string{"DEFAULT", "api", "database", "conductor", "deploy", "pxe", "anvil"} {
		kv := sections[sec]
		if len(kv) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n[%s]\n", sec)
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, kv[k])
		}
	}
	r.INI = b.String()
	return r, nil
}
