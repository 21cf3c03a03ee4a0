package ironicapi

import (
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
)

// nodeWritable are the node fields a client may set at creation or with
// PATCH (Ironic's node API schema), with the microversion introducing
// each. The *_interface fields and the rest follow nodeFieldVersions.
var nodeWritable = map[string]bool{
	"uuid": true, "name": true, "driver": true, "driver_info": true, "extra": true,
	"instance_info": true, "instance_uuid": true, "instance_name": true, "properties": true,
	"maintenance": true, "maintenance_reason": true, "chassis_uuid": true,
	"resource_class": true, "conductor_group": true, "automated_clean": true,
	"protected": true, "protected_reason": true, "owner": true, "lessee": true,
	"description": true, "retired": true, "retired_reason": true, "network_data": true,
	"shard": true, "parent_node": true, "disable_power_off": true,
	"bios_interface": true, "boot_interface": true, "console_interface": true,
	"deploy_interface": true, "firmware_interface": true, "inspect_interface": true,
	"management_interface": true, "network_interface": true, "power_interface": true,
	"raid_interface": true, "rescue_interface": true, "storage_interface": true,
	"vendor_interface": true,
}

// fieldError is the 400 for a field whose value has the wrong type.
func fieldError(node, field, expected string) *Error {
	if node == "" {
		node = "new node"
	}
	return badRequest("Invalid value for field %s of node %s: expected %s.", field, node, expected)
}

// asString reads a string field; JSON null is "".
func asString(node, field string, v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	}
	return "", fieldError(node, field, "a string")
}

// asBool reads a boolean field, accepting Ironic's string forms ("true",
// "yes", "1", "on" and their opposites), as its API types coerce them.
func asBool(node, field string, v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if b, ok := driver.ParseBool(t); ok {
			return b, nil
		}
	}
	return false, fieldError(node, field, "a boolean")
}

// asObject reads a JSON object field; null is an empty object.
func asObject(node, field string, v any) (map[string]any, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return t, nil
	}
	return nil, fieldError(node, field, "a JSON object")
}

// setNodeField sets the API field name of n to v (decoded JSON, numbers
// as json.Number), with Ironic's types. It refuses fields that are not
// writable or not in the request's version.
func (rq *request) setNodeField(n *baremetal.Node, field string, v any) error {
	id := n.UUID
	if id == "" {
		id = n.Name
	}
	if !nodeWritable[field] {
		if _, known := nodeFieldVersions[field]; known {
			return badRequest("The field %s of node %s cannot be set.", field, id)
		}
		return badRequest("Unknown attribute for node %s: %s.", id, field)
	}
	if minor := nodeFieldVersions[field]; minor > 0 && !rq.v.AtLeast(minor) {
		return notAcceptable("Request not acceptable.")
	}
	if strings.HasSuffix(field, "_interface") {
		s, err := asString(id, field, v)
		if err != nil {
			return err
		}
		kind, err := driver.ParseKind(strings.TrimSuffix(field, "_interface"))
		if err != nil {
			return badRequest("Unknown attribute for node %s: %s.", id, field)
		}
		ifs := nodeIfaces(n)
		ifs[kind] = s
		n.SetInterfaces(ifs)
		return nil
	}
	var err error
	switch field {
	case "uuid":
		var s string
		if s, err = asString(id, field, v); err == nil {
			if !looksLikeUUID(s) {
				return fieldError(id, field, "a UUID")
			}
			n.UUID = strings.ToLower(s)
		}
	case "name":
		n.Name, err = asString(id, field, v)
	case "driver":
		n.Driver, err = asString(id, field, v)
	case "instance_uuid":
		var s string
		if s, err = asString(id, field, v); err == nil {
			if s != "" && !looksLikeUUID(s) {
				return fieldError(id, field, "a UUID")
			}
			n.InstanceUUID = strings.ToLower(s)
		}
	case "instance_name":
		n.InstanceName, err = asString(id, field, v)
	case "maintenance_reason":
		n.MaintenanceReason, err = asString(id, field, v)
	case "chassis_uuid":
		var s string
		if s, err = asString(id, field, v); err == nil {
			if s != "" && !looksLikeUUID(s) {
				return badRequest("Expected UUID for chassis_uuid: %s", s)
			}
			n.ChassisUUID = strings.ToLower(s)
		}
	case "resource_class":
		n.ResourceClass, err = asString(id, field, v)
		if err == nil && len(n.ResourceClass) > 80 {
			return fieldError(id, field, "at most 80 characters")
		}
	case "conductor_group":
		n.ConductorGroup, err = asString(id, field, v)
		n.ConductorGroup = strings.ToLower(n.ConductorGroup)
	case "protected_reason":
		n.ProtectedReason, err = asString(id, field, v)
	case "owner":
		n.Owner, err = asString(id, field, v)
	case "lessee":
		n.Lessee, err = asString(id, field, v)
	case "description":
		n.Description, err = asString(id, field, v)
	case "retired_reason":
		n.RetiredReason, err = asString(id, field, v)
	case "shard":
		n.Shard, err = asString(id, field, v)
	case "parent_node":
		n.ParentNode, err = asString(id, field, v)
	case "maintenance":
		n.Maintenance, err = asBool(id, field, v)
	case "protected":
		n.Protected, err = asBool(id, field, v)
	case "retired":
		n.Retired, err = asBool(id, field, v)
	case "disable_power_off":
		n.DisablePowerOff, err = asBool(id, field, v)
	case "automated_clean":
		if v == nil {
			n.AutomatedClean = nil
			return nil
		}
		var b bool
		if b, err = asBool(id, field, v); err == nil {
			n.AutomatedClean = &b
		}
	case "driver_info":
		n.DriverInfo, err = asObject(id, field, v)
	case "extra":
		n.Extra, err = asObject(id, field, v)
	case "instance_info":
		n.InstanceInfo, err = asObject(id, field, v)
	case "properties":
		n.Properties, err = asObject(id, field, v)
	case "network_data":
		n.NetworkData, err = asObject(id, field, v)
	default:
		return fmt.Errorf("ironicapi: writable field %s has no setter", field)
	}
	return err
}

// nodeIfaces is n's interface fields by kind (SetInterfaces sets all of
// them at once).
func nodeIfaces(n *baremetal.Node) map[driver.Kind]string {
	return map[driver.Kind]string{
		driver.KindBIOS: n.BIOSInterface, driver.KindBoot: n.BootInterface,
		driver.KindConsole: n.ConsoleInterface, driver.KindDeploy: n.DeployInterface,
		driver.KindFirmware: n.FirmwareInterface, driver.KindInspect: n.InspectInterface,
		driver.KindManagement: n.ManagementInterface, driver.KindNetwork: n.NetworkInterface,
		driver.KindPower: n.PowerInterface, driver.KindRAID: n.RAIDInterface,
		driver.KindRescue: n.RescueInterface, driver.KindStorage: n.StorageInterface,
		driver.KindVendor: n.VendorInterface,
	}
}
