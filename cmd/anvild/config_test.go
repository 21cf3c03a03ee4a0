package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
)

func writeConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "anvil.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultConfig(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	c, err := parseConfig(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostIP != "127.0.0.1" || c.Port != 6385 || c.AuthStrategy != "noauth" || c.StatePath != "anvil-state" ||
		c.Drivers.EnabledHardwareTypes != nil || c.PluginDirs != nil || c.Connection != "" || c.EnableSSL {
		t.Fatalf("defaults: %+v", c)
	}
	t.Setenv("XDG_STATE_HOME", "/var/state")
	if c, _ = parseConfig(nil, nil, nil); c.StatePath != "/var/state/anvil" {
		t.Fatalf("state path with XDG_STATE_HOME: %q", c.StatePath)
	}
}

func TestConfigFileAndFlags(t *testing.T) {
	conf := writeConf(t, `[DEFAULT]
host = conductor-1
auth_strategy = http_basic
http_basic_auth_user_file = /etc/anvil/htpasswd
enabled_hardware_types = fake-hardware, ipmi
enabled_deploy_interfaces = direct,fake
default_deploy_interface = direct
transport_url = rabbit://nothing
transport_url = rabbit://twice

[api]
host_ip = 0.0.0.0
port = 7000
public_endpoint = https://bm.example:6385

[conductor]
heartbeat_interval = 5
heartbeat_timeout = 30
sync_power_state_interval = 0
automated_clean = false
enable_health_monitoring = false
deploy_callback_timeout = 600
rescue_password_hash_algorithm = sha512
conductor_group = rack1
max_concurrent_deploy = 10
max_concurrent_clean = -1
graceful_shutdown_timeout = 20
node_locked_retry_attempts = 5

[database]
connection = postgresql+psycopg2://u@db/ironic

[deploy]
fast_track = yes
default_boot_mode = bios

[agent]
require_tls = False
command_timeout = 120

[anvil]
agent_command_polling = false
`)
	var warnings []string
	c, err := parseConfig([]string{"--config-file", conf, "--port", "7001", "--conductor-group", "rack2", "--debug"}, nil,
		func(msg string, kv ...any) {
			warnings = append(warnings, msg+" "+strings.TrimSpace(strings.Repeat("%v ", len(kv))))
		})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"host", c.Host, "conductor-1"},
		{"auth", c.AuthStrategy, "http_basic"},
		{"htpasswd", c.HTPasswdFile, "/etc/anvil/htpasswd"},
		{"hardware types", c.Drivers.EnabledHardwareTypes, []string{"fake-hardware", "ipmi"}},
		{"deploy interfaces", c.Drivers.EnabledInterfaces[driver.KindDeploy], []string{"direct", "fake"}},
		{"default deploy", c.Drivers.DefaultInterfaces[driver.KindDeploy], "direct"},
		{"host_ip", c.HostIP, "0.0.0.0"},
		{"port: the flag wins", c.Port, 7001},
		{"public endpoint", c.PublicEndpoint, "https://bm.example:6385"},
		{"keepalive", c.Conductor.KeepaliveInterval, 5 * time.Second},
		{"heartbeat timeout", c.HeartbeatTimeout, 30 * time.Second},
		{"power sync 0 disables", c.Conductor.SyncPowerStateInterval, time.Duration(-1)},
		{"automated clean", c.Conductor.DisableAutomatedClean, true},
		{"health monitoring off", c.Conductor.DisableHealthMonitoring, true},
		{"deploy callback", c.Conductor.DeployCallbackTimeout, 600 * time.Second},
		{"rescue password hash", c.Conductor.RescuePasswordHashAlgorithm, "sha512"},
		{"group: the flag wins", c.Conductor.ConductorGroup, "rack2"},
		{"max deploy", c.Conductor.MaxConcurrentDeploy, 10},
		{"max clean", c.Conductor.MaxConcurrentClean, -1},
		{"drain", c.Conductor.DrainTimeout, 20 * time.Second},
		{"lock attempts", c.LockAttempts, 5},
		{"connection", c.Connection, "postgresql+psycopg2://u@db/ironic"},
		{"fast track", c.Conductor.Agent.FastTrack, true},
		{"boot mode", string(c.PXE.DefaultBootMode), "bios"},
		{"require tls", c.AgentRequireTLS, false},
		{"command timeout", c.AgentCommand, 120 * time.Second},
		{"agent command polling off", c.Conductor.Agent.PollCommands, false},
		{"debug flag", c.Debug, true},
		{"unknown options warned once", c.warnedConfig, []string{"[DEFAULT]transport_url"}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
	if len(warnings) != 1 {
		t.Errorf("warnings = %q, want one", warnings)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		conf string
		args []string
		want string
	}{
		{name: "relative http_root", conf: "[deploy]\nhttp_root = html\n", want: `[deploy]http_root = "html": expected an absolute directory path`},
		{name: "bad port in file", conf: "[api]\nport = http\n", want: `anvil.conf line 2: [api]port = "http": expected an integer >= 0`},
		{name: "port out of range", args: []string{"--port", "70000"}, want: "[api]port"},
		{name: "bad boolean", conf: "[conductor]\n\nautomated_clean = maybe\n", want: `line 3: [conductor]automated_clean = "maybe": expected a boolean`},
		{name: "rescue hash md5 refused", conf: "[conductor]\nrescue_password_hash_algorithm = md5\n", want: `[conductor]rescue_password_hash_algorithm = "md5": expected one of sha256, sha512`},
		{name: "keystone refused", conf: "[DEFAULT]\nauth_strategy = keystone\n", want: "[DEFAULT]auth_strategy = \"keystone\": expected one of noauth, http_basic"},
		{name: "bad flag value", args: []string{"--host-ip", "not-an-ip"}, want: `flag --host-ip: [api]host_ip = "not-an-ip": expected an IP address`},
		{name: "negative timeout", conf: "[conductor]\ndeploy_callback_timeout = -5\n", want: "[conductor]deploy_callback_timeout"},
		{name: "zero limit", conf: "[conductor]\nmax_concurrent_clean = 0\n", want: "expected an integer >= 1 (or -1 for no limit)"},
		{name: "empty hardware types", args: []string{"--enabled-hardware-types", " , "}, want: "[DEFAULT]enabled_hardware_types"},
		{name: "ssl without key", conf: "[api]\nenable_ssl_api = true\ncert_file = /c.pem\n", want: "needs both [api]cert_file and [api]key_file"},
		{name: "tls flag alone", args: []string{"--tls-cert", "/c.pem"}, want: "needs both"},
		{name: "netboot without http_url", args: []string{"--netboot"}, want: "[deploy]http_url"},
		{name: "syntax error", conf: "[api\n", want: "line 1: section header without a closing ]"},
		{name: "missing file", args: []string{"--config-file", "/nonexistent/anvil.conf"}, want: "/nonexistent/anvil.conf"},
		{name: "positional argument", args: []string{"serve"}, want: `unexpected argument "serve"`},
		{name: "otlp endpoint without scheme", args: []string{"--otlp-traces-endpoint", "collector:4317"}, want: "[anvil]otlp_traces_endpoint"},
		{name: "otlp endpoint with a path", conf: "[anvil]\notlp_traces_endpoint = http://collector:4317/v1/traces\n", want: "without path"},
		{name: "otlp endpoint with credentials", args: []string{"--otlp-traces-endpoint", "https://u:p@collector:4317"}, want: "without path or credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.conf != "" {
				args = append([]string{"--config-file", writeConf(t, tc.conf)}, args...)
			}
			_, err := parseConfig(args, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "u:p@") {
				t.Fatalf("err = %v shows a password", err)
			}
		})
	}
	var ve *ConfigValueError
	_, err := parseConfig([]string{"--port", "x"}, nil, nil)
	if !errors.As(err, &ve) || ve.Section != "api" || ve.Name != "port" {
		t.Fatalf("err = %#v, want a *ConfigValueError for [api]port", err)
	}
}

func TestParseConnection(t *testing.T) {
	tests := []struct {
		conn       string
		sqlite, pg string
		bad        bool
	}{
		{conn: "", sqlite: "state/anvil.sqlite"},
		{conn: "sqlite://", sqlite: ":memory:"},
		{conn: "sqlite:///ironic.sqlite", sqlite: "ironic.sqlite"},
		{conn: "sqlite:////var/lib/ironic/ironic.sqlite?timeout=5", sqlite: "/var/lib/ironic/ironic.sqlite"},
		{conn: "postgresql://u@db:5432/ironic", pg: "postgresql://u@db:5432/ironic"},
		{conn: "postgresql+psycopg2://u:pw@db/ironic", pg: "postgresql://u:pw@db/ironic"},
		{conn: "host=db dbname=ironic", pg: "host=db dbname=ironic"},
		{conn: "mysql+pymysql://u:secretpw@db/ironic", bad: true},
		{conn: "sqlite:///", bad: true},
	}
	for _, tc := range tests {
		got, err := parseConnection(tc.conn, "state")
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "[database]connection") || strings.Contains(err.Error(), "secretpw") {
				t.Errorf("%q: err = %v, want a [database]connection error without the password", tc.conn, err)
			}
			continue
		}
		if err != nil || got.sqlite != tc.sqlite || got.postgres != tc.pg {
			t.Errorf("%q: %+v, %v; want sqlite %q postgres %q", tc.conn, got, err, tc.sqlite, tc.pg)
		}
	}
}

// TestConfigPollsAgentCommandsByDefault: anvild continues a step when the
// agent finishes it ([anvil]agent_command_polling, on unless set false).
func TestConfigPollsAgentCommandsByDefault(t *testing.T) {
	c, err := parseConfig(nil, nil, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Conductor.Agent.PollCommands {
		t.Fatal("PollCommands off by default in anvild, want on")
	}
}

// TestMediaEnv: [deploy]http_root and http_url reach the plugins as the
// redfish plugin's publishing directory and URL; either alone does not.
func TestMediaEnv(t *testing.T) {
	cfg, err := parseConfig([]string{"--config-file", writeConf(t, "[deploy]\nhttp_root = /shared/html\nhttp_url = http://192.0.2.2:6180\n")}, nil, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(mediaEnv(cfg), " ")
	if want := "ANVIL_REDFISH_HTTP_ROOT=/shared/html ANVIL_REDFISH_HTTP_URL=http://192.0.2.2:6180"; got != want {
		t.Errorf("plugin environment %q, want %q", got, want)
	}
	cfg.HTTPURL = ""
	if env := mediaEnv(cfg); env != nil {
		t.Errorf("http_root alone gives %q, want nothing", env)
	}
	// The boot ISO's loaders and kernel parameters.
	cfg, err = parseConfig([]string{"--config-file", writeConf(t, "[DEFAULT]\nisolinux_bin = /opt/isolinux.bin\nldlinux_c32 = /opt/ldlinux.c32\n"+
		"[anvil]\ngrub_efi = /opt/gcdx64.efi\n[redfish]\nkernel_append_params = nofb console=ttyS0\n")}, nil, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	got = strings.Join(mediaEnv(cfg), "|")
	if want := "ANVIL_REDFISH_ISOLINUX_BIN=/opt/isolinux.bin|ANVIL_REDFISH_LDLINUX_C32=/opt/ldlinux.c32|ANVIL_REDFISH_GRUB_EFI=/opt/gcdx64.efi|" +
		"ANVIL_REDFISH_KERNEL_APPEND_PARAMS=nofb console=ttyS0"; got != want {
		t.Errorf("plugin environment %q, want %q", got, want)
	}
	if _, err := parseConfig([]string{"--config-file", writeConf(t, "[DEFAULT]\nisolinux_bin = isolinux.bin\n")}, nil, func(string, ...any) {}); err == nil ||
		!strings.Contains(err.Error(), "isolinux_bin") {
		t.Errorf("a relative isolinux_bin: %v", err)
	}
}

// TestHTTPGRUBConfig: [anvil]http_grub_efi names the boot server's HTTP
// boot GRUB (netboot.Options.HTTPGRUB); a relative path is refused,
// naming the key.
func TestHTTPGRUBConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"--config-file", writeConf(t, "[anvil]\nhttp_grub_efi = /var/lib/anvil/grubhttpx64.efi\n")}, nil, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPGRUB != "/var/lib/anvil/grubhttpx64.efi" {
		t.Errorf("http_grub_efi = %q", cfg.HTTPGRUB)
	}
	if _, err := parseConfig([]string{"--config-file", writeConf(t, "[anvil]\nhttp_grub_efi = grubhttpx64.efi\n")}, nil, func(string, ...any) {}); err == nil ||
		!strings.Contains(err.Error(), "http_grub_efi") || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative http_grub_efi: %v", err)
	}
}
