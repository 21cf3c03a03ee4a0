package baremetal

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Mask is the text that replaces a secret value.
const Mask = "******"

// sensitiveKeys are the key fragments whose values are secrets (the list
// oslo.utils' mask_dict_password uses, reference §10.3): a key matches
// when, lower-cased, it contains one of them.
var sensitiveKeys = [...]string{
	"adminpass", "admin_pass", "password", "admin_password", "auth_token",
	"new_pass", "auth_password", "secret_uuid", "secret", "sys_pswd",
	"token", "configdrive", "chappassword", "encrypted_key", "private_key",
	"fernetkey", "sslkey", "passphrase", "cephclusterfsid",
	"octaviaheartbeatkey", "rabbitcookie", "cephmanilaclientkey",
	"pacemakerremoteauthkey", "designaterndckey", "cephadminkey",
	"heatauthencryptionkey", "cephclientkey", "keystonecredential",
	"barbicansimplecryptokek", "cephrgwkey", "swifthashsuffix",
	"migrationsshkey", "cephmdskey", "cephmonkey", "chapsecret",
	// SNMP keys are masked by Ironic's node_sanitize as well.
	"snmp_auth_key", "snmp_priv_key",
}

// secretInText finds "key=value", "key: value" and JSON-style
// "\"key\": \"value\"" pairs with a sensitive key inside free text, so a
// secret pasted into an unrelated string value or an error message is
// masked too. Group 1 is everything up to the value, group 2 the value.
var secretInText = regexp.MustCompile(`(?i)((?:[a-z0-9_\-]*(?:password|passwd|pswd|passphrase|secret|token|private_key|encrypted_key|sslkey|fernetkey|configdrive|adminpass|admin_pass|new_pass|snmp_auth_key|snmp_priv_key)[a-z0-9_\-]*)["']?\s*[=:]\s*["']?)([^"'\s,&;}]+)`)

// IsSensitiveKey reports whether a value stored under key is a secret by
// the masking rules of reference §10.3.
func IsSensitiveKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range sensitiveKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// MaskText replaces the values of sensitive "key=value" pairs in free text
// with Mask.
func MaskText(s string) string {
	// Every secret pair has a '=' or ':' between key and value; text
	// without either (most history lines) cannot match, and skipping the
	// regular expression for it keeps history writes cheap.
	if !strings.ContainsAny(s, "=:") {
		return s
	}
	return secretInText.ReplaceAllString(s, "${1}"+Mask)
}

// MaskSecrets returns a deep copy of m with every secret value replaced by
// Mask: values under a sensitive key (recursively through nested maps and
// lists), and sensitive "key=value" pairs inside other string values. m is
// not changed.
func MaskSecrets(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if IsSensitiveKey(k) {
			if v == nil {
				out[k] = nil
			} else {
				out[k] = Mask
			}
			continue
		}
		out[k] = maskValue(v)
	}
	return out
}

func maskValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return MaskSecrets(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = maskValue(e)
		}
		return out
	case []string:
		out := make([]string, len(t))
		for i, e := range t {
			out[i] = MaskText(e)
		}
		return out
	case string:
		return MaskText(t)
	default:
		return v
	}
}

// Masked returns a deep copy of n that is safe to show: DriverInfo,
// InstanceInfo and DriverInternalInfo have their secrets replaced by Mask,
// InstanceInfo's configdrive and image_url are replaced as Ironic does for
// callers without show_instance_secrets, and LastError, MaintenanceReason
// and the step fields are scanned for secrets in text.
func (n *Node) Masked() *Node {
	if n == nil {
		return nil
	}
	c := n.Clone()
	c.DriverInfo = MaskSecrets(n.DriverInfo)
	c.DriverInternalInfo = MaskSecrets(n.DriverInternalInfo)
	c.InstanceInfo = MaskSecrets(n.InstanceInfo)
	if c.InstanceInfo != nil {
		for _, k := range []string{"configdrive", "image_url"} {
			if v, ok := c.InstanceInfo[k]; ok && v != nil {
				c.InstanceInfo[k] = Mask
			}
		}
	}
	c.CleanStep = MaskSecrets(n.CleanStep)
	c.DeployStep = MaskSecrets(n.DeployStep)
	c.ServiceStep = MaskSecrets(n.ServiceStep)
	c.Extra = MaskSecrets(n.Extra)
	c.LastError = MaskText(n.LastError)
	c.MaintenanceReason = MaskText(n.MaintenanceReason)
	return c
}

// nodeView is the shape a Node takes in JSON, logs and formatted output.
// It is built from a masked copy only.
type nodeView struct {
	UUID                 string            `json:"uuid"`
	Name                 string            `json:"name,omitempty"`
	Driver               string            `json:"driver,omitempty"`
	ProvisionState       string            `json:"provision_state"`
	TargetProvisionState string            `json:"target_provision_state,omitempty"`
	PowerState           string            `json:"power_state,omitempty"`
	TargetPowerState     string            `json:"target_power_state,omitempty"`
	Maintenance          bool              `json:"maintenance"`
	MaintenanceReason    string            `json:"maintenance_reason,omitempty"`
	Fault                string            `json:"fault,omitempty"`
	Reservation          string            `json:"reservation,omitempty"`
	ConductorGroup       string            `json:"conductor_group,omitempty"`
	InstanceUUID         string            `json:"instance_uuid,omitempty"`
	LastError            string            `json:"last_error,omitempty"`
	Version              int64             `json:"version"`
	Interfaces           map[string]string `json:"interfaces,omitempty"`
	DriverInfo           map[string]any    `json:"driver_info,omitempty"`
	DriverInternalInfo   map[string]any    `json:"driver_internal_info,omitempty"`
	InstanceInfo         map[string]any    `json:"instance_info,omitempty"`
	Properties           map[string]any    `json:"properties,omitempty"`
	Extra                map[string]any    `json:"extra,omitempty"`
	Traits               []string          `json:"traits,omitempty"`
	CleanStep            map[string]any    `json:"clean_step,omitempty"`
	DeployStep           map[string]any    `json:"deploy_step,omitempty"`
	ServiceStep          map[string]any    `json:"service_step,omitempty"`
	ProvisionUpdatedAt   string            `json:"provision_updated_at,omitempty"`
	UpdatedAt            string            `json:"updated_at,omitempty"`
}

func (n Node) view() nodeView {
	m := n.Masked()
	v := nodeView{
		UUID: m.UUID, Name: m.Name, Driver: m.Driver,
		ProvisionState: m.ProvisionState, TargetProvisionState: m.TargetProvisionState,
		PowerState: m.PowerState, TargetPowerState: m.TargetPowerState,
		Maintenance: m.Maintenance, MaintenanceReason: m.MaintenanceReason, Fault: m.Fault,
		Reservation: m.Reservation, ConductorGroup: m.ConductorGroup,
		InstanceUUID: m.InstanceUUID, LastError: m.LastError, Version: m.Version,
		DriverInfo: m.DriverInfo, DriverInternalInfo: m.DriverInternalInfo,
		InstanceInfo: m.InstanceInfo, Properties: m.Properties, Extra: m.Extra,
		Traits: m.Traits, CleanStep: m.CleanStep, DeployStep: m.DeployStep,
		ServiceStep: m.ServiceStep,
	}
	ifaces := map[string]string{}
	for k, val := range map[string]string{
		"bios": m.BIOSInterface, "boot": m.BootInterface, "console": m.ConsoleInterface,
		"deploy": m.DeployInterface, "firmware": m.FirmwareInterface, "inspect": m.InspectInterface,
		"management": m.ManagementInterface, "network": m.NetworkInterface, "power": m.PowerInterface,
		"raid": m.RAIDInterface, "rescue": m.RescueInterface, "storage": m.StorageInterface,
		"vendor": m.VendorInterface,
	} {
		if val != "" {
			ifaces[k] = val
		}
	}
	if len(ifaces) > 0 {
		v.Interfaces = ifaces
	}
	if !m.ProvisionUpdatedAt.IsZero() {
		v.ProvisionUpdatedAt = m.ProvisionUpdatedAt.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	if !m.UpdatedAt.IsZero() {
		v.UpdatedAt = m.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	return v
}

// String returns a short masked description of the node: identity,
// states, lock holder and version. It never contains a secret.
func (n Node) String() string {
	name := ""
	if n.Name != "" {
		name = " (" + n.Name + ")"
	}
	s := fmt.Sprintf("node %s%s provision_state=%q", n.UUID, name, n.ProvisionState)
	if n.TargetProvisionState != "" {
		s += fmt.Sprintf(" target=%q", n.TargetProvisionState)
	}
	if n.PowerState != "" {
		s += fmt.Sprintf(" power_state=%q", n.PowerState)
	}
	if n.Maintenance {
		s += " maintenance=true"
	}
	if n.Reservation != "" {
		s += " reservation=" + n.Reservation
	}
	return s + fmt.Sprintf(" version=%d", n.Version)
}

// Format makes every fmt verb print a masked view: %v and %s print
// String, %+v and %#v print the full masked JSON view, %q quotes String.
// The raw struct, with its secrets, is never formatted.
func (n Node) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'q':
		_, _ = fmt.Fprintf(f, "%q", n.String())
	case f.Flag('+') || f.Flag('#'):
		b, err := json.Marshal(n.view())
		if err != nil {
			_, _ = fmt.Fprint(f, n.String())
			return
		}
		_, _ = f.Write(b)
	default:
		_, _ = fmt.Fprint(f, n.String())
	}
}

// LogValue makes log/slog log a masked group of the node's identity and
// state fields.
func (n Node) LogValue() slog.Value {
	v := n.view()
	attrs := []slog.Attr{
		slog.String("uuid", v.UUID),
		slog.String("provision_state", v.ProvisionState),
		slog.Int64("version", v.Version),
	}
	add := func(k, s string) {
		if s != "" {
			attrs = append(attrs, slog.String(k, s))
		}
	}
	add("name", v.Name)
	add("driver", v.Driver)
	add("target_provision_state", v.TargetProvisionState)
	add("power_state", v.PowerState)
	add("reservation", v.Reservation)
	add("last_error", v.LastError)
	if v.Maintenance {
		attrs = append(attrs, slog.Bool("maintenance", true))
	}
	if len(v.DriverInfo) > 0 {
		attrs = append(attrs, slog.Any("driver_info", v.DriverInfo))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON encodes the masked view of the node, so a Node that leaves
// through encoding/json (an API response, an event, a log line) carries no
// secret. Code that needs the secrets reads the fields directly.
func (n Node) MarshalJSON() ([]byte, error) {
	return json.Marshal(n.view())
}

// GoString returns the masked view, so %#v never prints secrets even when
// a caller bypasses Format.
func (n Node) GoString() string {
	b, err := json.Marshal(n.view())
	if err != nil {
		return n.String()
	}
	return string(b)
}

// Compile-time checks that Node, by value or pointer, masks itself
// wherever it is shown.
var (
	_ fmt.Formatter  = Node{}
	_ fmt.Formatter  = (*Node)(nil)
	_ fmt.Stringer   = (*Node)(nil)
	_ fmt.GoStringer = (*Node)(nil)
	_ slog.LogValuer = (*Node)(nil)
	_ json.Marshaler = (*Node)(nil)
)
