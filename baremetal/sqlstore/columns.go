package sqlstore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/anvilmetal/anvil/statemachine"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// nodeCol maps one column of the nodes table to a Node field: how to
// validate and encode the field for a write and how to decode it after a
// scan. The table below is the single place that knows the mapping, so
// inserts, updates and selects cannot drift apart.
type nodeCol struct {
	name string
	// write returns the value to bind, or an *InvalidFieldError.
	write func(n *baremetal.Node) (any, error)
	// dst returns a fresh scan destination.
	dst func() any
	// read copies a scanned destination into n.
	read func(n *baremetal.Node, dst any) error
}

// invalid builds the error for a node field.
func invalid(n *baremetal.Node, field, expected string, err error) error {
	ident := n.UUID
	if ident == "" {
		ident = n.Name
	}
	return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: field, Expected: expected, Err: err}
}

// checkText validates a string bound for a column of at most max
// characters (0: unbounded): valid UTF-8, no NUL byte, not too long.
func checkText(n *baremetal.Node, field, s string, max int) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return invalid(n, field, "valid UTF-8 text without NUL bytes", nil)
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		return invalid(n, field, fmt.Sprintf("at most %d characters", max), nil)
	}
	return nil
}

// strNN is a NOT NULL text column.
func strNN[T ~string](name string, max int, f func(n *baremetal.Node) *T) nodeCol {
	return nodeCol{
		name: name,
		write: func(n *baremetal.Node) (any, error) {
			s := string(*f(n))
			if err := checkText(n, name, s, max); err != nil {
				return nil, err
			}
			return s, nil
		},
		dst:  func() any { return new(string) },
		read: func(n *baremetal.Node, d any) error { *f(n) = T(*d.(*string)); return nil },
	}
}

// strNull is a nullable text column; "" is stored as NULL.
func strNull[T ~string](name string, max int, f func(n *baremetal.Node) *T) nodeCol {
	return nodeCol{
		name: name,
		write: func(n *baremetal.Node) (any, error) {
			s := string(*f(n))
			if s == "" {
				return nil, nil
			}
			if err := checkText(n, name, s, max); err != nil {
				return nil, err
			}
			return s, nil
		},
		dst:  func() any { return new(sql.NullString) },
		read: func(n *baremetal.Node, d any) error { *f(n) = T(d.(*sql.NullString).String); return nil },
	}
}

// jsonMap is a JSON object column; a nil map is stored as NULL.
func jsonMap(name string, f func(n *baremetal.Node) *map[string]any) nodeCol {
	return nodeCol{
		name: name,
		write: func(n *baremetal.Node) (any, error) {
			m := *f(n)
			if m == nil {
				return nil, nil
			}
			b, err := json.Marshal(m)
			if err != nil {
				return nil, invalid(n, name, "a JSON-encodable object", err)
			}
			if err := checkText(n, name, string(b), 0); err != nil {
				return nil, err
			}
			return string(b), nil
		},
		dst: func() any { return new(sql.NullString) },
		read: func(n *baremetal.Node, d any) error {
			ns := d.(*sql.NullString)
			if !ns.Valid {
				*f(n) = nil
				return nil
			}
			var m map[string]any
			// Numbers float64 would change (step arguments such as
			// 9007199254740993 or 1.0) come back as json.Number, the
			// others as float64 (see internal/jsonexact).
			if err := jsonexact.Decode([]byte(ns.String), &m); err != nil {
				return fmt.Errorf("sqlstore: node %s: decoding %s: %w", n.UUID, name, err)
			}
			*f(n) = m
			return nil
		},
	}
}

// boolNN is a NOT NULL boolean column.
func boolNN(name string, f func(n *baremetal.Node) *bool) nodeCol {
	return nodeCol{
		name:  name,
		write: func(n *baremetal.Node) (any, error) { return *f(n), nil },
		dst:   func() any { return new(bool) },
		read:  func(n *baremetal.Node, d any) error { *f(n) = *d.(*bool); return nil },
	}
}

// boolPtr is a nullable boolean column; nil is NULL.
func boolPtr(name string, f func(n *baremetal.Node) **bool) nodeCol {
	return nodeCol{
		name: name,
		write: func(n *baremetal.Node) (any, error) {
			if p := *f(n); p != nil {
				return *p, nil
			}
			return nil, nil
		},
		dst: func() any { return new(sql.NullBool) },
		read: func(n *baremetal.Node, d any) error {
			if nb := d.(*sql.NullBool); nb.Valid {
				v := nb.Bool
				*f(n) = &v
			} else {
				*f(n) = nil
			}
			return nil
		},
	}
}

// timeNull is a nullable timestamp stored as Unix microseconds; the zero
// time is NULL.
func timeNull(name string, f func(n *baremetal.Node) *time.Time) nodeCol {
	return nodeCol{
		name:  name,
		write: func(n *baremetal.Node) (any, error) { return timeArg(*f(n)), nil },
		dst:   func() any { return new(sql.NullInt64) },
		read:  func(n *baremetal.Node, d any) error { *f(n) = timeFrom(*d.(*sql.NullInt64)); return nil },
	}
}

// timeArg encodes a time for binding: NULL for the zero time.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// timeFrom decodes a nullable Unix-microsecond column.
func timeFrom(v sql.NullInt64) time.Time {
	if !v.Valid || v.Int64 == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// micros returns t as stored (UTC Unix microseconds).
func micros(t time.Time) int64 { return t.UnixMicro() }

// nodeCols lists the node columns written by both insert and update, in
// the order of the select list after the fixed columns.
var nodeCols = []nodeCol{
	strNull("name", 255, func(n *baremetal.Node) *string { return &n.Name }),
	strNull("instance_uuid", 36, func(n *baremetal.Node) *string { return &n.InstanceUUID }),
	strNull("instance_name", 255, func(n *baremetal.Node) *string { return &n.InstanceName }),
	strNN("driver", 255, func(n *baremetal.Node) *string { return &n.Driver }),
	strNull("bios_interface", 255, func(n *baremetal.Node) *string { return &n.BIOSInterface }),
	strNull("boot_interface", 255, func(n *baremetal.Node) *string { return &n.BootInterface }),
	strNull("console_interface", 255, func(n *baremetal.Node) *string { return &n.ConsoleInterface }),
	strNull("deploy_interface", 255, func(n *baremetal.Node) *string { return &n.DeployInterface }),
	strNull("firmware_interface", 255, func(n *baremetal.Node) *string { return &n.FirmwareInterface }),
	strNull("inspect_interface", 255, func(n *baremetal.Node) *string { return &n.InspectInterface }),
	strNull("management_interface", 255, func(n *baremetal.Node) *string { return &n.ManagementInterface }),
	strNull("network_interface", 255, func(n *baremetal.Node) *string { return &n.NetworkInterface }),
	strNull("power_interface", 255, func(n *baremetal.Node) *string { return &n.PowerInterface }),
	strNull("raid_interface", 255, func(n *baremetal.Node) *string { return &n.RAIDInterface }),
	strNull("rescue_interface", 255, func(n *baremetal.Node) *string { return &n.RescueInterface }),
	strNull("storage_interface", 255, func(n *baremetal.Node) *string { return &n.StorageInterface }),
	strNull("vendor_interface", 255, func(n *baremetal.Node) *string { return &n.VendorInterface }),
	jsonMap("driver_info", func(n *baremetal.Node) *map[string]any { return &n.DriverInfo }),
	jsonMap("driver_internal_info", func(n *baremetal.Node) *map[string]any { return &n.DriverInternalInfo }),
	jsonMap("instance_info", func(n *baremetal.Node) *map[string]any { return &n.InstanceInfo }),
	jsonMap("properties", func(n *baremetal.Node) *map[string]any { return &n.Properties }),
	jsonMap("extra", func(n *baremetal.Node) *map[string]any { return &n.Extra }),
	jsonMap("clean_step", func(n *baremetal.Node) *map[string]any { return &n.CleanStep }),
	jsonMap("deploy_step", func(n *baremetal.Node) *map[string]any { return &n.DeployStep }),
	jsonMap("service_step", func(n *baremetal.Node) *map[string]any { return &n.ServiceStep }),
	jsonMap("raid_config", func(n *baremetal.Node) *map[string]any { return &n.RAIDConfig }),
	jsonMap("target_raid_config", func(n *baremetal.Node) *map[string]any { return &n.TargetRAIDConfig }),
	jsonMap("network_data", func(n *baremetal.Node) *map[string]any { return &n.NetworkData }),
	strNull("power_state", 15, func(n *baremetal.Node) *statemachine.PowerState { return &n.PowerState }),
	strNull("target_power_state", 15, func(n *baremetal.Node) *statemachine.PowerState { return &n.TargetPowerState }),
	strNN("provision_state", 15, func(n *baremetal.Node) *statemachine.State { return &n.ProvisionState }),
	strNull("target_provision_state", 15, func(n *baremetal.Node) *statemachine.State { return &n.TargetProvisionState }),
	boolNN("maintenance", func(n *baremetal.Node) *bool { return &n.Maintenance }),
	strNull("maintenance_reason", 0, func(n *baremetal.Node) *string { return &n.MaintenanceReason }),
	strNull("fault", 255, func(n *baremetal.Node) *string { return &n.Fault }),
	boolNN("console_enabled", func(n *baremetal.Node) *bool { return &n.ConsoleEnabled }),
	strNull("last_error", 0, func(n *baremetal.Node) *string { return &n.LastError }),
	strNN("conductor_group", 255, func(n *baremetal.Node) *string { return &n.ConductorGroup }),
	{
		name: "conductor_affinity",
		write: func(n *baremetal.Node) (any, error) {
			if n.ConductorAffinity == 0 {
				return nil, nil
			}
			return n.ConductorAffinity, nil
		},
		dst:  func() any { return new(sql.NullInt64) },
		read: func(n *baremetal.Node, d any) error { n.ConductorAffinity = d.(*sql.NullInt64).Int64; return nil },
	},
	{
		name: "traits",
		write: func(n *baremetal.Node) (any, error) {
			if n.Traits == nil {
				return nil, nil
			}
			for _, t := range n.Traits {
				if t == "" {
					return nil, invalid(n, "traits", "non-empty trait names", nil)
				}
				if err := checkText(n, "traits", t, 255); err != nil {
					return nil, err
				}
			}
			b, err := json.Marshal(n.Traits)
			if err != nil {
				return nil, invalid(n, "traits", "a list of strings", err)
			}
			return string(b), nil
		},
		dst: func() any { return new(sql.NullString) },
		read: func(n *baremetal.Node, d any) error {
			ns := d.(*sql.NullString)
			if !ns.Valid {
				n.Traits = nil
				return nil
			}
			if err := json.Unmarshal([]byte(ns.String), &n.Traits); err != nil {
				return fmt.Errorf("sqlstore: node %s: decoding traits: %w", n.UUID, err)
			}
			return nil
		},
	},
	strNull("resource_class", 80, func(n *baremetal.Node) *string { return &n.ResourceClass }),
	strNull("owner", 255, func(n *baremetal.Node) *string { return &n.Owner }),
	strNull("lessee", 255, func(n *baremetal.Node) *string { return &n.Lessee }),
	strNull("description", 0, func(n *baremetal.Node) *string { return &n.Description }),
	boolNN("protected", func(n *baremetal.Node) *bool { return &n.Protected }),
	strNull("protected_reason", 0, func(n *baremetal.Node) *string { return &n.ProtectedReason }),
	boolNN("retired", func(n *baremetal.Node) *bool { return &n.Retired }),
	strNull("retired_reason", 0, func(n *baremetal.Node) *string { return &n.RetiredReason }),
	boolPtr("automated_clean", func(n *baremetal.Node) **bool { return &n.AutomatedClean }),
	timeNull("inspection_started_at", func(n *baremetal.Node) *time.Time { return &n.InspectionStartedAt }),
	timeNull("inspection_finished_at", func(n *baremetal.Node) *time.Time { return &n.InspectionFinishedAt }),
	strNull("boot_mode", 16, func(n *baremetal.Node) *string { return &n.BootMode }),
	boolPtr("secure_boot", func(n *baremetal.Node) **bool { return &n.SecureBoot }),
	strNull("shard", 255, func(n *baremetal.Node) *string { return &n.Shard }),
	strNull("parent_node", 36, func(n *baremetal.Node) *string { return &n.ParentNode }),
	boolNN("disable_power_off", func(n *baremetal.Node) *bool { return &n.DisablePowerOff }),
	strNull("health", 32, func(n *baremetal.Node) *string { return &n.Health }),
	strNull("allocation_uuid", 36, func(n *baremetal.Node) *string { return &n.AllocationUUID }),
	{
		name: "chassis_uuid",
		write: func(n *baremetal.Node) (any, error) {
			if n.ChassisUUID == "" {
				return nil, nil
			}
			if !isUUID(n.ChassisUUID) {
				return nil, invalid(n, "chassis_uuid", "the UUID of a stored chassis", nil)
			}
			return strings.ToLower(n.ChassisUUID), nil
		},
		dst:  func() any { return new(sql.NullString) },
		read: func(n *baremetal.Node, d any) error { n.ChassisUUID = d.(*sql.NullString).String; return nil },
	},
}

// fixedCols are selected before nodeCols; they are written by the store's
// own logic rather than copied from the caller.
var fixedCols = []string{"id", "uuid", "reservation", "provision_updated_at", "created_at", "updated_at", "version"}

// nodeSelectList is the column list of every node select.
var nodeSelectList = func() string {
	names := append([]string(nil), fixedCols...)
	for _, c := range nodeCols {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}()

// rowScanner is satisfied by *sql.Row, *sql.Rows and their sqlx forms.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanNode reads one node row selected with nodeSelectList.
func scanNode(r rowScanner) (*baremetal.Node, error) {
	var (
		n                             baremetal.Node
		reservation                   sql.NullString
		provUpdated                   sql.NullInt64
		createdAt, updatedAt, version int64
	)
	dsts := make([]any, 0, len(fixedCols)+len(nodeCols))
	dsts = append(dsts, &n.ID, &n.UUID, &reservation, &provUpdated, &createdAt, &updatedAt, &version)
	for _, c := range nodeCols {
		dsts = append(dsts, c.dst())
	}
	if err := r.Scan(dsts...); err != nil {
		return nil, err
	}
	n.Reservation = reservation.String
	n.ProvisionUpdatedAt = timeFrom(provUpdated)
	n.CreatedAt = time.UnixMicro(createdAt).UTC()
	n.UpdatedAt = time.UnixMicro(updatedAt).UTC()
	n.Version = version
	for i, c := range nodeCols {
		if err := c.read(&n, dsts[len(fixedCols)+i]); err != nil {
			return nil, err
		}
	}
	return &n, nil
}

// nodeArgs validates n and returns the bind values of nodeCols in order.
func nodeArgs(n *baremetal.Node) ([]any, error) {
	args := make([]any, 0, len(nodeCols))
	for _, c := range nodeCols {
		v, err := c.write(n)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	return args, nil
}
