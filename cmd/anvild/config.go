package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
)

// Config is everything anvild is configured with: Ironic's options where
// Ironic has one (same section and name), Anvil's own in [anvil].
type Config struct {
	ConfigFile string

	// [DEFAULT]
	Host         string // host: the conductor's name; default os.Hostname()
	StatePath    string // state_path: where the SQLite file lives
	Debug        bool
	AuthStrategy string // noauth or http_basic
	HTPasswdFile string // http_basic_auth_user_file
	Drivers      driver.Config
	RingReset    time.Duration // hash_ring_reset_interval

	// [api]
	HostIP                  string
	Port                    int
	PublicEndpoint          string
	MaxLimit                int
	EnableSSL               bool
	CertFile, KeyFile       string
	EnableRamdiskEndpoints  bool
	RestrictLookup          bool
	RamdiskHeartbeatTimeout time.Duration
	MaxBodyBytes            int64
	MaxProvisionBodyBytes   int64

	// [database]
	Connection string

	// [conductor], [deploy], [agent] for the conductor.
	Conductor        conductor.Options
	HeartbeatTimeout time.Duration // [conductor]heartbeat_timeout (shared store only)
	AgentRequireTLS  bool          // [agent]require_tls
	AgentCommand     time.Duration // [agent]command_timeout
	AgentAttempts    int           // [agent]max_command_attempts
	powerOffRetries  int           // [agent]post_deploy_get_power_state_retries
	powerOffInterval time.Duration // [agent]post_deploy_get_power_state_retry_interval

	// [pxe], [deploy] and [conductor] for the boot server and the network
	// boot interfaces.
	PXE     pxe.Options
	HTTPURL string // [deploy]http_url: netboot.Options.HTTPBase
	// HTTPRoot is [deploy]http_root: the directory served at http_url
	// where the redfish plugin publishes each node's boot ISO (virtual
	// media); with http_url it replaces the plugin's
	// ANVIL_REDFISH_HTTP_ROOT and ANVIL_REDFISH_HTTP_URL.
	HTTPRoot   string
	TFTPServer string // [pxe]tftp_server
	// HTTPRootListen is [anvil]http_root_listen: anvild serves HTTPRoot
	// over HTTP on this address itself (no web server beside it).
	HTTPRootListen string
	// VMedia are the redfish plugin's boot ISO options: [DEFAULT]
	// isolinux_bin and ldlinux_c32, [anvil]grub_efi,
	// [redfish]kernel_append_params.
	VMedia vmediaConfig

	// [anvil]
	PluginDirs  []string
	Netboot     bool
	NetbootHTTP string // netboot_http_listen
	NetbootTFTP string // netboot_tftp_listen
	IPXEDir     string
	// HTTPGRUB is http_grub_efi: netboot.Options.HTTPGRUB, the GRUB UEFI
	// HTTP boot loads for the http boot interface (netboot/grubimage).
	HTTPGRUB     string
	Ring         string
	LogFormat    string
	Metrics      bool
	ShowVersion  bool
	warnedConfig []string

	// WebUI is web_ui: the web UI at /ui/ and the consoles at /console/.
	WebUI bool
	// OTLPTraces is otlp_traces_endpoint: the OTLP/gRPC collector traces
	// are exported to ("http://host:4317", https for TLS); "" exports none.
	OTLPTraces string

	// [conductor]node_locked_retry_attempts and _interval.
	LockAttempts int
	LockInterval time.Duration

	// Images: the image cache and the direct deploy's image options.
	Images imageConfig
}

// defaultConfig is `anvild` with no flag and no file: SQLite under the
// state directory, noauth, 127.0.0.1:6385, and Ironic's driver defaults
// (driverDefaults) settled once the plugins are found.
func defaultConfig() *Config {
	state := "anvil-state"
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		state = filepath.Join(x, "anvil")
	}
	return &Config{
		StatePath:              state,
		AuthStrategy:           "noauth",
		HTPasswdFile:           "/etc/ironic/htpasswd",
		Drivers:                driver.Config{EnabledInterfaces: map[driver.Kind][]string{}, DefaultInterfaces: map[driver.Kind]string{}},
		HostIP:                 "127.0.0.1",
		Port:                   6385,
		MaxLimit:               1000,
		EnableRamdiskEndpoints: true,
		RestrictLookup:         true,
		AgentRequireTLS:        true,
		// Agent commands are waited on (AgentSettings.PollCommands): a
		// step continues when the agent finishes it, not at the next
		// heartbeat. [anvil]agent_command_polling = false restores
		// Ironic's pacing.
		Conductor:   conductor.Options{DrainTimeout: 60 * time.Second, Agent: conductor.AgentSettings{PollCommands: true}},
		Ring:        "balanced",
		LogFormat:   "text",
		Metrics:     true,
		WebUI:       true,
		NetbootHTTP: "",
		IPXEDir:     netboot.DefaultIPXEDir,
		Images:      defaultImageConfig(),
	}
}

// ConfigValueError is a bad value: where it came from (file and line, or
// the flag), the section and option, and what was expected.
type ConfigValueError struct {
	Source   string
	Section  string
	Name     string
	Value    string
	Expected string
}

func (e *ConfigValueError) Error() string {
	// A refused value may hold a password (a URL's): it is masked.
	return fmt.Sprintf("anvild: %s: [%s]%s = %q: expected %s", e.Source, e.Section, e.Name, baremetal.MaskText(e.Value), e.Expected)
}

// option is one configuration option: its section and name (Ironic's
// where Ironic has it), an optional command-line flag, and how a value
// is applied. set returns the expectation when the value is refused.
type option struct {
	section, name string
	flag, usage   string
	set           func(c *Config, v string) (expected string)
}

func str(f func(*Config) *string) func(*Config, string) string {
	return func(c *Config, v string) string { *f(c) = v; return "" }
}

func absPath(f func(*Config) *string) func(*Config, string) string {
	return func(c *Config, v string) string {
		if !filepath.IsAbs(v) {
			return "an absolute file path"
		}
		*f(c) = v
		return ""
	}
}

func boolean(f func(*Config) *bool) func(*Config, string) string {
	return func(c *Config, v string) string {
		b, ok := parseBool(v)
		if !ok {
			return "a boolean (true/false, yes/no, on/off, 1/0)"
		}
		*f(c) = b
		return ""
	}
}

func integer(min int, f func(*Config) *int) func(*Config, string) string {
	return func(c *Config, v string) string {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			return fmt.Sprintf("an integer >= %d", min)
		}
		*f(c) = n
		return ""
	}
}

// seconds is an Ironic integer-seconds option. zeroDisables maps Ironic's
// 0 ("disabled") to the conductor's negative duration.
func seconds(zeroDisables bool, f func(*Config) *time.Duration) func(*Config, string) string {
	return func(c *Config, v string) string {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return "a whole number of seconds >= 0"
		}
		d := time.Duration(n) * time.Second
		if n == 0 && zeroDisables {
			d = -1
		}
		*f(c) = d
		return ""
	}
}

// limit is max_concurrent_deploy/clean: Ironic's is >= 1; Anvil's -1
// means no limit, accepted too.
func limit(f func(*Config) *int) func(*Config, string) string {
	return func(c *Config, v string) string {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || (n < 1 && n != -1) {
			return "an integer >= 1 (or -1 for no limit)"
		}
		*f(c) = n
		return ""
	}
}

func list(f func(*Config) *[]string) func(*Config, string) string {
	return func(c *Config, v string) string { *f(c) = splitList(v); return "" }
}

func splitList(v string) []string {
	var out []string
	for s := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == '\n' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0":
		return false, true
	}
	return false, false
}

func choice(choices []string, f func(*Config) *string) func(*Config, string) string {
	return func(c *Config, v string) string {
		for _, ch := range choices {
			if v == ch {
				*f(c) = v
				return ""
			}
		}
		return "one of " + strings.Join(choices, ", ")
	}
}

// options are every option anvild knows.
func options() []option {
	opts := []option{
		// [DEFAULT]
		{"DEFAULT", "host", "host", "conductor name ([DEFAULT]host; default the machine's hostname)", str(func(c *Config) *string { return &c.Host })},
		{"DEFAULT", "state_path", "state-dir", "directory of the embedded SQLite database ([DEFAULT]state_path; default $XDG_STATE_HOME/anvil or ./anvil-state)", str(func(c *Config) *string { return &c.StatePath })},
		{"DEFAULT", "debug", "debug", "log at debug level ([DEFAULT]debug)", boolean(func(c *Config) *bool { return &c.Debug })},
		{"DEFAULT", "auth_strategy", "auth-strategy", "noauth or http_basic ([DEFAULT]auth_strategy)", choice([]string{"noauth", "http_basic"}, func(c *Config) *string { return &c.AuthStrategy })},
		{"DEFAULT", "http_basic_auth_user_file", "http-basic-auth-user-file", "htpasswd file of user:bcrypt lines ([DEFAULT]http_basic_auth_user_file)", str(func(c *Config) *string { return &c.HTPasswdFile })},
		{"DEFAULT", "enabled_hardware_types", "enabled-hardware-types", "comma-separated hardware types ([DEFAULT]enabled_hardware_types; default ipmi,redfish, those whose plugin is found, else fake-hardware)", func(c *Config, v string) string {
			l := splitList(v)
			if len(l) == 0 {
				return "at least one hardware type"
			}
			c.Drivers.EnabledHardwareTypes = l
			return ""
		}},
		{"DEFAULT", "hash_ring_reset_interval", "", "", seconds(false, func(c *Config) *time.Duration { return &c.RingReset })},

		// [api]
		{"api", "host_ip", "host-ip", "API listen address ([api]host_ip; default 127.0.0.1)", func(c *Config, v string) string {
			if net.ParseIP(v) == nil && v != "localhost" {
				return "an IP address"
			}
			c.HostIP = v
			return ""
		}},
		{"api", "port", "port", "API port ([api]port; default 6385; 0 picks a free one)", integer(0, func(c *Config) *int { return &c.Port })},
		{"api", "public_endpoint", "public-endpoint", "public URL of the API in links and for agents ([api]public_endpoint)", str(func(c *Config) *string { return &c.PublicEndpoint })},
		{"api", "max_limit", "", "", integer(1, func(c *Config) *int { return &c.MaxLimit })},
		{"api", "enable_ssl_api", "", "", boolean(func(c *Config) *bool { return &c.EnableSSL })},
		{"api", "cert_file", "tls-cert", "TLS certificate (PEM); with --tls-key serves HTTPS ([api]cert_file, enable_ssl_api)", func(c *Config, v string) string { c.CertFile = v; return "" }},
		{"api", "key_file", "tls-key", "TLS private key (PEM) ([api]key_file)", func(c *Config, v string) string { c.KeyFile = v; return "" }},
		{"api", "enable_ramdisk_endpoints", "", "", boolean(func(c *Config) *bool { return &c.EnableRamdiskEndpoints })},
		{"api", "restrict_lookup", "", "", boolean(func(c *Config) *bool { return &c.RestrictLookup })},
		{"api", "ramdisk_heartbeat_timeout", "", "", seconds(false, func(c *Config) *time.Duration { return &c.RamdiskHeartbeatTimeout })},
		{"api", "max_json_body_size", "", "", func(c *Config, v string) string {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 4 {
				return "a size in bytes >= 4"
			}
			c.MaxBodyBytes = n
			return ""
		}},
		{"api", "max_json_body_size_provision", "", "", func(c *Config, v string) string {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 4 {
				return "a size in bytes >= 4"
			}
			c.MaxProvisionBodyBytes = n
			return ""
		}},

		// [database]
		{"database", "connection", "database-connection", "sqlite:///path or postgresql://... DSN ([database]connection; default SQLite under the state directory)", str(func(c *Config) *string { return &c.Connection })},

		// [conductor]
		{"conductor", "workers_pool_size", "", "", integer(1, func(c *Config) *int { return &c.Conductor.Workers })},
		{"conductor", "heartbeat_interval", "", "", seconds(false, func(c *Config) *time.Duration { return &c.Conductor.KeepaliveInterval })},
		{"conductor", "heartbeat_timeout", "", "", seconds(false, func(c *Config) *time.Duration { return &c.HeartbeatTimeout })},
		{"conductor", "sync_power_state_interval", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.SyncPowerStateInterval })},
		{"conductor", "check_provision_state_interval", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.CheckProvisionStateInterval })},
		{"conductor", "deploy_callback_timeout", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.DeployCallbackTimeout })},
		{"conductor", "clean_callback_timeout", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.CleanCallbackTimeout })},
		{"conductor", "rescue_callback_timeout", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.RescueCallbackTimeout })},
		{"conductor", "rescue_password_hash_algorithm", "", "", choice([]string{conductor.RescueHashSHA256, conductor.RescueHashSHA512},
			func(c *Config) *string { return &c.Conductor.RescuePasswordHashAlgorithm })},
		{"conductor", "service_callback_timeout", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.ServiceCallbackTimeout })},
		{"conductor", "inspect_wait_timeout", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.InspectWaitTimeout })},
		{"conductor", "power_state_change_timeout", "", "", seconds(false, func(c *Config) *time.Duration { return &c.Conductor.PowerStateChangeTimeout })},
		{"conductor", "power_failure_recovery_interval", "", "", seconds(true, func(c *Config) *time.Duration { return &c.Conductor.PowerFailureRecoveryInterval })},
		{"conductor", "power_state_sync_max_retries", "", "", integer(1, func(c *Config) *int { return &c.Conductor.PowerStateSyncMaxRetries })},
		{"conductor", "force_power_state_during_sync", "", "", func(c *Config, v string) string {
			b, ok := parseBool(v)
			if !ok {
				return "a boolean"
			}
			c.Conductor.KeepHardwarePowerState = !b
			return ""
		}},
		{"conductor", "enable_health_monitoring", "", "", func(c *Config, v string) string {
			b, ok := parseBool(v)
			if !ok {
				return "a boolean"
			}
			c.Conductor.DisableHealthMonitoring = !b
			return ""
		}},
		{"conductor", "periodic_max_workers", "", "", integer(1, func(c *Config) *int { return &c.Conductor.PeriodicMaxWorkers })},
		{"conductor", "automated_clean", "", "", func(c *Config, v string) string {
			b, ok := parseBool(v)
			if !ok {
				return "a boolean"
			}
			c.Conductor.DisableAutomatedClean = !b
			return ""
		}},
		{"conductor", "allow_deleting_available_nodes", "", "", func(c *Config, v string) string {
			b, ok := parseBool(v)
			if !ok {
				return "a boolean"
			}
			c.Conductor.RefuseDeletingAvailable = !b
			return ""
		}},
		{"conductor", "conductor_group", "conductor-group", "the conductor group this conductor serves ([conductor]conductor_group)", str(func(c *Config) *string { return &c.Conductor.ConductorGroup })},
		{"conductor", "max_concurrent_deploy", "", "", limit(func(c *Config) *int { return &c.Conductor.MaxConcurrentDeploy })},
		{"conductor", "max_concurrent_clean", "", "", limit(func(c *Config) *int { return &c.Conductor.MaxConcurrentClean })},
		{"conductor", "max_concurrent_per_conductor_group", "", "", boolean(func(c *Config) *bool { return &c.Conductor.MaxConcurrentPerConductorGroup })},
		{"conductor", "max_conductor_wait_step_seconds", "", "", seconds(false, func(c *Config) *time.Duration { return &c.Conductor.MaxConductorWaitStep })},
		{"conductor", "graceful_shutdown_timeout", "", "", func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return "a whole number of seconds >= 0 (0: wait for the running operations without limit)"
			}
			c.Conductor.DrainTimeout = time.Duration(n) * time.Second
			if n == 0 {
				c.Conductor.DrainTimeout = 100 * 365 * 24 * time.Hour
			}
			return ""
		}},
		{"conductor", "node_locked_retry_attempts", "", "", func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return "an integer >= 1"
			}
			c.LockAttempts = n
			return ""
		}},
		{"conductor", "node_locked_retry_interval", "", "", func(c *Config, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return "a whole number of seconds >= 1"
			}
			c.LockInterval = time.Duration(n) * time.Second
			return ""
		}},
		{"conductor", "deploy_kernel", "", "", str(func(c *Config) *string { return &c.PXE.DeployKernel })},
		{"conductor", "deploy_ramdisk", "", "", str(func(c *Config) *string { return &c.PXE.DeployRamdisk })},
		{"conductor", "rescue_kernel", "", "", str(func(c *Config) *string { return &c.PXE.RescueKernel })},
		{"conductor", "rescue_ramdisk", "", "", str(func(c *Config) *string { return &c.PXE.RescueRamdisk })},

		// [deploy]
		{"deploy", "fast_track", "", "", boolean(func(c *Config) *bool { return &c.Conductor.Agent.FastTrack })},
		{"deploy", "fast_track_timeout", "", "", seconds(false, func(c *Config) *time.Duration { return &c.Conductor.Agent.FastTrackTimeout })},
		{"deploy", "default_boot_mode", "", "", func(c *Config, v string) string {
			if v != string(netboot.BIOS) && v != string(netboot.UEFI) {
				return "bios or uefi"
			}
			c.PXE.DefaultBootMode = netboot.Mode(v)
			return ""
		}},
		{"deploy", "http_url", "", "", str(func(c *Config) *string { return &c.HTTPURL })},
		{"deploy", "http_root", "", "", func(c *Config, v string) string {
			if !filepath.IsAbs(v) {
				return "an absolute directory path"
			}
			c.HTTPRoot = v
			return ""
		}},

		// The virtual media boot ISO (the redfish plugin's).
		{"DEFAULT", "isolinux_bin", "", "", absPath(func(c *Config) *string { return &c.VMedia.ISOLINUX })},
		{"DEFAULT", "ldlinux_c32", "", "", absPath(func(c *Config) *string { return &c.VMedia.LDLinux })},
		{"anvil", "grub_efi", "", "", absPath(func(c *Config) *string { return &c.VMedia.GRUBEFI })},
		{"redfish", "kernel_append_params", "", "", str(func(c *Config) *string { return &c.VMedia.KernelAppendParams })},
		{"anvil", "http_root_listen", "http-root-listen", "serve [deploy]http_root (virtual media images) over HTTP on this address (e.g. 192.0.2.1:6180)",
			str(func(c *Config) *string { return &c.HTTPRootListen })},

		// [pxe]
		{"pxe", "kernel_append_params", "", "", str(func(c *Config) *string { return &c.PXE.KernelAppendParams })},
		{"pxe", "ipxe_timeout", "", "", seconds(false, func(c *Config) *time.Duration { return &c.PXE.IPXETimeout })},
		{"pxe", "tftp_server", "", "", func(c *Config, v string) string {
			if _, err := netip.ParseAddr(v); err != nil {
				return "an IP address"
			}
			c.TFTPServer = v
			return ""
		}},

		// [agent]
		{"agent", "require_tls", "", "", boolean(func(c *Config) *bool { return &c.AgentRequireTLS })},
		{"agent", "command_timeout", "", "", seconds(false, func(c *Config) *time.Duration { return &c.AgentCommand })},
		{"agent", "max_command_attempts", "", "", integer(1, func(c *Config) *int { return &c.AgentAttempts })},
		{"agent", "deploy_forces_oob_reboot", "", "", boolean(func(c *Config) *bool { return &c.Conductor.Agent.ForceOOBPowerOff })},
		{"agent", "post_deploy_get_power_state_retries", "", "", integer(1, func(c *Config) *int { return &c.powerOffRetries })},
		{"agent", "post_deploy_get_power_state_retry_interval", "", "", seconds(false, func(c *Config) *time.Duration { return &c.powerOffInterval })},

		// [anvil]: Anvil's own.
		{"anvil", "plugin_dirs", "plugin-dir", "comma-separated driver plugin directories of anvil-driver-<name> executables (default: anvild's own directory and $XDG_DATA_HOME/anvil/plugins)", func(c *Config, v string) string {
			// Set, even to nothing: only an unset option means the
			// default directories.
			c.PluginDirs = append([]string{}, splitList(v)...)
			return ""
		}},
		{"anvil", "netboot", "netboot", "run the boot server (TFTP and HTTP) and enable the network boot interfaces", boolean(func(c *Config) *bool { return &c.Netboot })},
		{"anvil", "netboot_http_listen", "netboot-http-listen", "boot server HTTP listen address (e.g. 192.0.2.1:8080)", str(func(c *Config) *string { return &c.NetbootHTTP })},
		{"anvil", "netboot_tftp_listen", "netboot-tftp-listen", "boot server TFTP listen address (e.g. 192.0.2.1:69)", str(func(c *Config) *string { return &c.NetbootTFTP })},
		{"anvil", "ipxe_dir", "", "", str(func(c *Config) *string { return &c.IPXEDir })},
		{"anvil", "http_grub_efi", "", "", absPath(func(c *Config) *string { return &c.HTTPGRUB })},
		{"anvil", "hash_ring", "", "", choice([]string{"balanced", "ironic"}, func(c *Config) *string { return &c.Ring })},
		{"anvil", "log_format", "log-format", "text or json", choice([]string{"text", "json"}, func(c *Config) *string { return &c.LogFormat })},
		{"anvil", "metrics", "", "", boolean(func(c *Config) *bool { return &c.Metrics })},
		{"anvil", "otlp_traces_endpoint", "otlp-traces-endpoint", "export OpenTelemetry traces over OTLP/gRPC to this collector URL (http://host:4317; off when empty)",
			func(c *Config, v string) string {
				v = strings.TrimSpace(v)
				if v == "" {
					c.OTLPTraces = ""
					return ""
				}
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil {
					return "an http:// or https:// URL of an OTLP/gRPC collector, without path or credentials (http://collector:4317)"
				}
				c.OTLPTraces = v
				return ""
			}},
		{"anvil", "web_ui", "web-ui", "serve the web UI at /ui/ and the serial consoles' pages at /console/", boolean(func(c *Config) *bool { return &c.WebUI })},
		{"anvil", "agent_command_polling", "", "", boolean(func(c *Config) *bool { return &c.Conductor.Agent.PollCommands })},
	}
	opts = append(opts, imageOptions()...)
	for _, k := range driver.Kinds() {
		opts = append(opts,
			option{"DEFAULT", "enabled_" + string(k) + "_interfaces", "", "", func(c *Config, v string) string {
				c.Drivers.EnabledInterfaces[k] = splitList(v)
				return ""
			}},
			option{"DEFAULT", "default_" + string(k) + "_interface", "", "", func(c *Config, v string) string {
				c.Drivers.DefaultInterfaces[k] = v
				return ""
			}})
	}
	return opts
}

// flagValue is a flag given on the command line, applied after the file.
type flagValue struct {
	opt   option
	value string
}

// parseConfig reads args (flags, then the optional --config-file) into a
// Config: defaults, then the file, then the flags. warn is called once per
// option of the file anvild does not know.
func parseConfig(args []string, stderrUsage func(fs *flag.FlagSet), warn func(msg string, args ...any)) (*Config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("anvild", flag.ContinueOnError)
	if stderrUsage != nil {
		stderrUsage(fs)
	}
	fs.StringVar(&c.ConfigFile, "config-file", "", "INI configuration file with Ironic's sections and options")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version and exit")
	var given []flagValue
	opts := options()
	for _, o := range opts {
		if o.flag == "" {
			continue
		}
		if o.flag == "debug" || o.flag == "netboot" {
			fs.BoolFunc(o.flag, o.usage, func(v string) error { given = append(given, flagValue{o, v}); return nil })
			continue
		}
		fs.Func(o.flag, o.usage, func(v string) error { given = append(given, flagValue{o, v}); return nil })
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("anvild: unexpected argument %q (options are flags: --help lists them)", fs.Arg(0))
	}
	if c.ShowVersion {
		return c, nil
	}
	if c.ConfigFile != "" {
		ini, err := readINI(c.ConfigFile)
		if err != nil {
			return nil, err
		}
		known := map[[2]string]option{}
		for _, o := range opts {
			known[[2]string{o.section, o.name}] = o
		}
		warned := map[[2]string]bool{}
		for _, v := range ini.Values {
			key := [2]string{v.Section, v.Name}
			o, ok := known[key]
			if !ok {
				if !warned[key] {
					warned[key] = true
					c.warnedConfig = append(c.warnedConfig, "["+v.Section+"]"+v.Name)
					if warn != nil {
						warn("config option not used by anvild; ignored", "file", ini.Path, "line", v.Line, "section", v.Section, "option", v.Name)
					}
				}
				continue
			}
			if exp := o.set(c, v.Value); exp != "" {
				return nil, &ConfigValueError{Source: fmt.Sprintf("%s line %d", ini.Path, v.Line), Section: v.Section, Name: v.Name, Value: v.Value, Expected: exp}
			}
		}
	}
	for _, g := range given {
		if exp := g.opt.set(c, g.value); exp != "" {
			return nil, &ConfigValueError{Source: "flag --" + g.opt.flag, Section: g.opt.section, Name: g.opt.name, Value: g.value, Expected: exp}
		}
		if g.opt.flag == "tls-cert" || g.opt.flag == "tls-key" {
			c.EnableSSL = true
		}
	}
	return c, c.check()
}

// check refuses combinations no single option shows.
func (c *Config) check() error {
	if c.EnableSSL && (c.CertFile == "" || c.KeyFile == "") {
		return fmt.Errorf("anvild: [api]enable_ssl_api needs both [api]cert_file and [api]key_file (--tls-cert, --tls-key)")
	}
	if c.Port > 65535 {
		return &ConfigValueError{Source: "configuration", Section: "api", Name: "port", Value: strconv.Itoa(c.Port), Expected: "a port number 0-65535"}
	}
	if c.HTTPRootListen != "" && c.HTTPRoot == "" {
		return fmt.Errorf("anvild: [anvil]http_root_listen needs [deploy]http_root, the directory it serves")
	}
	if c.Netboot && c.HTTPURL == "" {
		return fmt.Errorf("anvild: the boot server ([anvil]netboot) needs [deploy]http_url, the URL machines reach its HTTP server at")
	}
	if c.Netboot && c.NetbootHTTP == "" && c.NetbootTFTP == "" {
		return fmt.Errorf("anvild: the boot server ([anvil]netboot) needs [anvil]netboot_http_listen or netboot_tftp_listen")
	}
	return nil
}
