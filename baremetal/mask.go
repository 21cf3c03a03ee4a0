package baremetal

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/anvilmetal/anvil/internal/mask"
	"github.com/anvilmetal/anvil/statemachine"
)

// Mask is the text that replaces a secret value.
const Mask = mask.Placeholder

// IsSensitiveKey reports whether a value stored under key is a secret:
// when the key, lower-cased and without separators, contains one of the
// fragments oslo.utils' mask_dict_password looks for (password, token,
// secret, configdrive, passphrase, sslkey, private_key, ...; reference
// §10.3), Ironic's SNMP keys, or Anvil's additions (passwd, credential,
// authorization, api_key, access_key, ...), or when its last word is
// pass, pwd or pw (bmc_pass). The rules, shared by every masker in Anvil,
// are documented in full in internal/mask and its golden tables.
func IsSensitiveKey(key string) bool { return mask.IsSecretKey(key) }

// MaskText replaces with Mask the secret values written next to a
// sensitive key in free text: key=value, "key": "value" (JSON, Python
// repr), key: "value", key:value (Go's %v), <key>value</key>, the password
// of a URL's userinfo, Authorization credentials and ipmitool's -P, -k and
// -y values. It never removes a word that is not a secret: "password: is
// required" and "configdrive: contents exceed ..." are left as they are.
func MaskText(s string) string { return mask.Text(s) }

// MaskSecrets returns a deep copy of m with every secret value replaced by
// Mask: values under a sensitive key (recursively through nested maps and
// lists; a nil value stays nil), and secrets written in other string
// values (see MaskText). m is not changed; MaskSecrets(nil) is nil.
func MaskSecrets(m map[string]any) map[string]any { return mask.Map(m) }

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
	UUID                 string                  `json:"uuid"`
	Name                 string                  `json:"name,omitempty"`
	Driver               string                  `json:"driver,omitempty"`
	ProvisionState       statemachine.State      `json:"provision_state"`
	TargetProvisionState statemachine.State      `json:"target_provision_state,omitempty"`
	PowerState           statemachine.PowerState `json:"power_state,omitempty"`
	TargetPowerState     statemachine.PowerState `json:"target_power_state,omitempty"`
	Maintenance          bool                    `json:"maintenance"`
	MaintenanceReason    string                  `json:"maintenance_reason,omitempty"`
	Fault                string                  `json:"fault,omitempty"`
	Reservation          string                  `json:"reservation,omitempty"`
	ConductorGroup       string                  `json:"conductor_group,omitempty"`
	InstanceUUID         string                  `json:"instance_uuid,omitempty"`
	LastError            string                  `json:"last_error,omitempty"`
	Version              int64                   `json:"version"`
	Interfaces           map[string]string       `json:"interfaces,omitempty"`
	DriverInfo           map[string]any          `json:"driver_info,omitempty"`
	DriverInternalInfo   map[string]any          `json:"driver_internal_info,omitempty"`
	InstanceInfo         map[string]any          `json:"instance_info,omitempty"`
	Properties           map[string]any          `json:"properties,omitempty"`
	Extra                map[string]any          `json:"extra,omitempty"`
	Traits               []string                `json:"traits,omitempty"`
	CleanStep            map[string]any          `json:"clean_step,omitempty"`
	DeployStep           map[string]any          `json:"deploy_step,omitempty"`
	ServiceStep          map[string]any          `json:"service_step,omitempty"`
	ProvisionUpdatedAt   string                  `json:"provision_updated_at,omitempty"`
	UpdatedAt            string                  `json:"updated_at,omitempty"`
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
		slog.String("provision_state", string(v.ProvisionState)),
		slog.Int64("version", v.Version),
	}
	add := func(k, s string) {
		if s != "" {
			attrs = append(attrs, slog.String(k, s))
		}
	}
	add("name", v.Name)
	add("driver", v.Driver)
	add("target_provision_state", string(v.TargetProvisionState))
	add("power_state", string(v.PowerState))
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
