package plugin

import (
	"reflect"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// operation is one row of the wire contract of Invoke: the name sent in
// InvokeRequest.operation, the interface kind it is sent to ("" for every
// kind), the arguments it reads from args_json (JSON names of invokeArgs
// fields), the type its result_json decodes into (nil for none) and the
// capability the implementation must have advertised ("" for none).
type operation struct {
	name       string
	kind       driver.Kind
	args       []string
	result     reflect.Type
	capability string
}

// rawArgTypes gives the type of the invokeArgs fields that travel as raw
// JSON.
var rawArgTypes = map[string]reflect.Type{"step": reflect.TypeFor[steps.Step]()}

// operations returns the wire contract of Invoke, one row per operation.
// testdata/wire-contract.golden is its rendering; a change to a row shows
// up there in review, and TestWireContract* check that proxies send and
// the server dispatches exactly these rows.
func operations() []operation {
	return []operation{
		op("", opValidate, nil, nil, ""),
		op("", opExecuteStep, []string{"step_kind", "step"}, reflect.TypeFor[driver.StepResult](), "step_runner"),

		op(driver.KindPower, opGetPowerState, nil, reflect.TypeFor[driver.PowerState](), ""),
		op(driver.KindPower, opSetPowerState, []string{"target", "timeout_ns"}, nil, ""),
		op(driver.KindPower, opReboot, []string{"timeout_ns"}, nil, ""),

		op(driver.KindManagement, opSupportedBootDevices, nil, reflect.TypeFor[[]driver.BootDevice](), ""),
		op(driver.KindManagement, opSetBootDevice, []string{"device", "persistent"}, nil, ""),
		op(driver.KindManagement, opGetBootDevice, nil, reflect.TypeFor[driver.BootDeviceState](), ""),
		op(driver.KindManagement, opGetBootMode, nil, reflect.TypeFor[driver.BootMode](), "boot_mode"),
		op(driver.KindManagement, opSetBootMode, []string{"mode"}, nil, "boot_mode"),
		op(driver.KindManagement, opInjectNMI, nil, nil, "nmi"),
		op(driver.KindManagement, opGetIndicatorState, nil, reflect.TypeFor[driver.IndicatorState](), "indicator"),
		op(driver.KindManagement, opSetIndicatorState, []string{"indicator"}, nil, "indicator"),
		op(driver.KindManagement, opGetSecureBootState, nil, reflect.TypeFor[bool](), "secure_boot"),
		op(driver.KindManagement, opSetSecureBootState, []string{"enabled"}, nil, "secure_boot"),
		op(driver.KindManagement, opGetSensorsData, nil, reflect.TypeFor[[]driver.SensorReading](), "sensors"),
		op(driver.KindManagement, opAttachVirtualMedia, []string{"vmedia_device", "image_url"}, nil, "virtual_media"),
		op(driver.KindManagement, opDetachVirtualMedia, []string{"vmedia_devices"}, nil, "virtual_media"),
		op(driver.KindManagement, opGetVirtualMedia, nil, reflect.TypeFor[[]driver.VirtualMedia](), "virtual_media"),
		op(driver.KindManagement, opGetNodeHealth, nil, reflect.TypeFor[driver.Health](), "health"),

		op(driver.KindBoot, opPrepareRamdisk, []string{"params"}, nil, ""),
		op(driver.KindBoot, opCleanUpRamdisk, nil, nil, ""),
		op(driver.KindBoot, opPrepareInstance, nil, nil, ""),
		op(driver.KindBoot, opCleanUpInstance, nil, nil, ""),

		op(driver.KindDeploy, opPrepare, nil, nil, ""),
		op(driver.KindDeploy, opDeploy, nil, reflect.TypeFor[driver.StepResult](), ""),
		op(driver.KindDeploy, opTearDown, nil, nil, ""),
		op(driver.KindDeploy, opCleanUp, nil, nil, ""),
		op(driver.KindDeploy, opTakeOver, nil, nil, ""),
		op(driver.KindDeploy, opPrepareSteps, []string{"step_kind"}, reflect.TypeFor[driver.StepResult](), "step_preparer"),
		op(driver.KindDeploy, opTearDownSteps, []string{"step_kind"}, nil, "step_preparer"),

		op(driver.KindInspect, opInspectHardware, nil, reflect.TypeFor[driver.StepResult](), ""),
		op(driver.KindBIOS, opCacheBIOSSettings, nil, reflect.TypeFor[[]driver.BIOSSetting](), ""),
		op(driver.KindRAID, opValidateRAIDConfig, []string{"config"}, nil, ""),

		op(driver.KindConsole, opStartConsole, nil, nil, ""),
		op(driver.KindConsole, opStopConsole, nil, nil, ""),
		op(driver.KindConsole, opGetConsole, nil, reflect.TypeFor[driver.ConsoleInfo](), ""),

		op(driver.KindVendor, opVendorCall, []string{"method", "http_method", "args"}, reflect.TypeFor[any](), ""),

		op(driver.KindRescue, opRescue, nil, reflect.TypeFor[driver.StepResult](), ""),
		op(driver.KindRescue, opUnrescue, nil, nil, ""),
		op(driver.KindRescue, opCleanUp, nil, nil, ""),

		op(driver.KindFirmware, opCacheFirmwareComponents, nil, reflect.TypeFor[[]driver.FirmwareComponent](), ""),

		op(driver.KindNetwork, opAddNetwork, []string{"purpose"}, nil, ""),
		op(driver.KindNetwork, opRemoveNetwork, []string{"purpose"}, nil, ""),

		op(driver.KindStorage, opAttachVolumes, nil, nil, ""),
		op(driver.KindStorage, opDetachVolumes, nil, nil, ""),
		op(driver.KindStorage, opShouldWriteImage, nil, reflect.TypeFor[bool](), ""),
	}
}

func op(kind driver.Kind, name string, args []string, result reflect.Type, capability string) operation {
	return operation{name: name, kind: kind, args: args, result: result, capability: capability}
}
