package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/statemachine"

	"github.com/anvilmetal/anvil/driver"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/internal/jsonexact"
	"github.com/anvilmetal/anvil/steps"
)

// invokeArgs carries the arguments of every operation; each operation
// uses the fields it needs.
type invokeArgs struct {
	Target     driver.PowerState     `json:"target,omitempty"`
	TimeoutNS  int64                 `json:"timeout_ns,omitempty"`
	Device     driver.BootDevice     `json:"device,omitempty"`
	Persistent bool                  `json:"persistent,omitempty"`
	Mode       driver.BootMode       `json:"mode,omitempty"`
	Params     map[string]any        `json:"params,omitempty"`
	Config     map[string]any        `json:"config,omitempty"`
	StepKind   steps.Kind            `json:"step_kind,omitempty"`
	Step       json.RawMessage       `json:"step,omitempty"`
	Method     string                `json:"method,omitempty"`
	HTTPMethod string                `json:"http_method,omitempty"`
	Args       map[string]any        `json:"args,omitempty"`
	Purpose    driver.NetworkPurpose `json:"purpose,omitempty"`
	Indicator  driver.IndicatorState `json:"indicator,omitempty"`
	Enabled    bool                  `json:"enabled,omitempty"`
	// The virtual media arguments (since protocol 3).
	VMediaDevice  driver.VirtualMediaDevice   `json:"vmedia_device,omitempty"`
	VMediaDevices []driver.VirtualMediaDevice `json:"vmedia_devices,omitempty"`
	ImageURL      string                      `json:"image_url,omitempty"`
}

func marshalMap(m map[string]any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return json.Marshal(m)
}

func unmarshalMap(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if m, ok := decodeObjectFast(b); ok {
		return m, nil
	}
	var m map[string]any
	// Numbers float64 would change (step arguments such as
	// 9007199254740993 or 1.0) cross the process boundary exactly.
	if err := jsonexact.Decode(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func encodeTask(t *driver.Task) (*pb.Task, error) {
	out := &pb.Task{
		NodeUuid: t.NodeUUID, NodeName: t.NodeName, HardwareType: t.HardwareType,
		ProvisionState: string(t.ProvisionState), PowerState: string(t.PowerState),
	}
	if len(t.Interfaces) > 0 {
		out.Interfaces = make(map[string]string, len(t.Interfaces))
		for k, v := range t.Interfaces {
			out.Interfaces[string(k)] = v
		}
	}
	var err error
	if out.DriverInfoJson, err = marshalMap(t.DriverInfo); err != nil {
		return nil, fmt.Errorf("driver_info: %w", err)
	}
	if out.DriverInternalInfoJson, err = marshalMap(t.DriverInternalInfo); err != nil {
		return nil, fmt.Errorf("driver_internal_info: %w", err)
	}
	if out.InstanceInfoJson, err = marshalMap(t.InstanceInfo); err != nil {
		return nil, fmt.Errorf("instance_info: %w", err)
	}
	if out.PropertiesJson, err = marshalMap(t.Properties); err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	if out.TargetRaidConfigJson, err = marshalMap(t.TargetRAIDConfig); err != nil {
		return nil, fmt.Errorf("target_raid_config: %w", err)
	}
	if t.Ports != nil {
		if out.PortsJson, err = json.Marshal(t.Ports); err != nil {
			return nil, fmt.Errorf("ports: %w", err)
		}
	}
	return out, nil
}

func decodeTask(in *pb.Task) (*driver.Task, error) {
	if in == nil {
		return nil, errors.New("no task")
	}
	t := &driver.Task{
		NodeUUID: in.NodeUuid, NodeName: in.NodeName, HardwareType: in.HardwareType,
		ProvisionState: statemachine.State(in.ProvisionState), PowerState: driver.PowerState(in.PowerState),
	}
	if len(in.Interfaces) > 0 {
		t.Interfaces = make(map[driver.Kind]string, len(in.Interfaces))
		for k, v := range in.Interfaces {
			t.Interfaces[driver.Kind(k)] = v
		}
	}
	var err error
	if t.DriverInfo, err = unmarshalMap(in.DriverInfoJson); err != nil {
		return nil, fmt.Errorf("driver_info: %w", err)
	}
	if t.DriverInternalInfo, err = unmarshalMap(in.DriverInternalInfoJson); err != nil {
		return nil, fmt.Errorf("driver_internal_info: %w", err)
	}
	if t.InstanceInfo, err = unmarshalMap(in.InstanceInfoJson); err != nil {
		return nil, fmt.Errorf("instance_info: %w", err)
	}
	if t.Properties, err = unmarshalMap(in.PropertiesJson); err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	if t.TargetRAIDConfig, err = unmarshalMap(in.TargetRaidConfigJson); err != nil {
		return nil, fmt.Errorf("target_raid_config: %w", err)
	}
	if len(in.PortsJson) > 0 {
		if err := json.Unmarshal(in.PortsJson, &t.Ports); err != nil {
			return nil, fmt.Errorf("ports: %w", err)
		}
	}
	return t, nil
}

func encodeChanges(c driver.Changes) (*pb.Changes, error) {
	if c.Empty() {
		return nil, nil
	}
	out := &pb.Changes{PortsChanged: c.PortsChanged}
	for _, f := range []struct {
		m   map[string]any
		dst *[]byte
	}{
		{c.DriverInfo, &out.DriverInfoJson}, {c.DriverInternalInfo, &out.DriverInternalInfoJson},
		{c.InstanceInfo, &out.InstanceInfoJson}, {c.Properties, &out.PropertiesJson},
	} {
		if f.m == nil {
			continue
		}
		b, err := json.Marshal(f.m)
		if err != nil {
			return nil, err
		}
		*f.dst = b
	}
	if c.PortsChanged {
		b, err := json.Marshal(c.Ports)
		if err != nil {
			return nil, err
		}
		out.PortsJson = b
	}
	return out, nil
}

func decodeChanges(in *pb.Changes) (driver.Changes, error) {
	var c driver.Changes
	if in == nil {
		return c, nil
	}
	for _, f := range []struct {
		b   []byte
		dst *map[string]any
	}{
		{in.DriverInfoJson, &c.DriverInfo}, {in.DriverInternalInfoJson, &c.DriverInternalInfo},
		{in.InstanceInfoJson, &c.InstanceInfo}, {in.PropertiesJson, &c.Properties},
	} {
		if f.b == nil {
			continue
		}
		m, ok := decodeObjectFast(f.b)
		if !ok {
			m = map[string]any{}
			if err := jsonexact.Decode(f.b, &m); err != nil {
				return c, err
			}
		}
		*f.dst = m
	}
	if in.PortsChanged {
		c.PortsChanged = true
		if len(in.PortsJson) > 0 {
			if err := json.Unmarshal(in.PortsJson, &c.Ports); err != nil {
				return c, err
			}
		}
		if c.Ports == nil {
			c.Ports = []driver.Port{}
		}
	}
	return c, nil
}

// encodeError converts a driver error into its wire form.
func encodeError(err error) *pb.Error {
	if err == nil {
		return nil
	}
	out := &pb.Error{Message: err.Error()}
	var (
		unsup *driver.UnsupportedError
		miss  *driver.MissingParameterError
		inval *driver.InvalidParameterError
		step  *driver.StepNotFoundError
		unav  *driver.UnavailableError
		auth  *driver.BMCAuthError
		unr   *driver.BMCUnreachableError
		ident *driver.IdentityMismatchError
	)
	var detail any
	switch {
	case errors.As(err, &unav):
		out.Code, detail = pb.Error_UNAVAILABLE, unav
	case errors.As(err, &ident):
		out.Code, detail = pb.Error_IDENTITY_MISMATCH, ident
	case errors.As(err, &auth):
		out.Code, detail = pb.Error_BMC_AUTHENTICATION, auth
	case errors.As(err, &unr):
		out.Code, detail = pb.Error_BMC_UNREACHABLE, unr
	case errors.As(err, &unsup):
		out.Code, detail = pb.Error_UNSUPPORTED, unsup
	case errors.As(err, &miss):
		out.Code, detail = pb.Error_MISSING_PARAMETER, miss
	case errors.As(err, &inval):
		out.Code, detail = pb.Error_INVALID_PARAMETER, inval
	case errors.As(err, &step):
		out.Code, detail = pb.Error_STEP_NOT_FOUND, step
	case errors.Is(err, driver.ErrInjectedFailure):
		out.Code = pb.Error_INJECTED_FAILURE
	case errors.Is(err, context.Canceled):
		out.Code = pb.Error_CANCELED
	case errors.Is(err, context.DeadlineExceeded):
		out.Code = pb.Error_DEADLINE_EXCEEDED
	}
	if detail != nil {
		out.DetailJson, _ = json.Marshal(detail)
	}
	return out
}

// RemoteError is an error a plugin's implementation returned. Its message
// is the plugin's, prefixed with the plugin name; Unwrap gives the
// rebuilt typed error (*driver.UnsupportedError, ...) or sentinel so that
// errors.Is and errors.As work as for a built-in implementation.
type RemoteError struct {
	Plugin  string
	Message string
	Err     error
}

func (e *RemoteError) Error() string { return "plugin " + e.Plugin + ": " + e.Message }

// Unwrap returns the rebuilt driver error.
func (e *RemoteError) Unwrap() error { return e.Err }

func decodeError(pluginName string, in *pb.Error) error {
	if in == nil {
		return nil
	}
	var typed error
	switch in.Code {
	case pb.Error_UNSUPPORTED:
		typed = decodeDetail[driver.UnsupportedError](in.DetailJson, driver.ErrUnsupported)
	case pb.Error_MISSING_PARAMETER:
		typed = decodeDetail[driver.MissingParameterError](in.DetailJson, driver.ErrMissingParameter)
	case pb.Error_INVALID_PARAMETER:
		typed = decodeDetail[driver.InvalidParameterError](in.DetailJson, driver.ErrInvalidParameter)
	case pb.Error_STEP_NOT_FOUND:
		typed = decodeDetail[driver.StepNotFoundError](in.DetailJson, driver.ErrStepNotFound)
	case pb.Error_UNAVAILABLE:
		typed = decodeDetail[driver.UnavailableError](in.DetailJson, driver.ErrUnavailable)
	case pb.Error_BMC_AUTHENTICATION:
		typed = decodeDetail[driver.BMCAuthError](in.DetailJson, driver.ErrBMCAuthentication)
	case pb.Error_BMC_UNREACHABLE:
		typed = decodeDetail[driver.BMCUnreachableError](in.DetailJson, driver.ErrBMCUnreachable)
	case pb.Error_IDENTITY_MISMATCH:
		typed = decodeDetail[driver.IdentityMismatchError](in.DetailJson, driver.ErrIdentityMismatch)
	case pb.Error_INJECTED_FAILURE:
		typed = driver.ErrInjectedFailure
	case pb.Error_CANCELED:
		typed = context.Canceled
	case pb.Error_DEADLINE_EXCEEDED:
		typed = context.DeadlineExceeded
	}
	return &RemoteError{Plugin: pluginName, Message: in.Message, Err: typed}
}

// decodeDetail rebuilds *T from JSON, falling back to the sentinel when
// the detail is unreadable.
func decodeDetail[T any, PT interface {
	*T
	error
}](b []byte, sentinel error) error {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return sentinel
	}
	return PT(&v)
}
