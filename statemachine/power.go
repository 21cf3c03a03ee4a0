package statemachine

// PowerState is a node's power state, with Ironic's exact strings. The empty
// PowerState is Ironic's null: unknown, or no power action in progress.
type PowerState string

// Ironic's power states.
const (
	PowerOn         PowerState = "power on"
	PowerOff        PowerState = "power off"
	PowerReboot     PowerState = "rebooting"
	PowerSoftReboot PowerState = "soft rebooting"
	PowerSoftOff    PowerState = "soft power off"
	// PowerError is what a driver may report for a failed read; Anvil
	// treats it as a failure.
	PowerError PowerState = "error"
	// PowerNone is the unknown power state and the empty target.
	PowerNone PowerState = ""
)

// PowerTargets lists the values a power request (PUT
// /v1/nodes/{node}/states/power) may aim at. The caller owns the slice.
func PowerTargets() []PowerState {
	return []PowerState{PowerOn, PowerOff, PowerReboot, PowerSoftOff, PowerSoftReboot}
}

// PowerStates lists every power state a node may record, PowerNone
// included. The caller owns the slice.
func PowerStates() []PowerState {
	return []PowerState{PowerOn, PowerOff, PowerReboot, PowerSoftReboot, PowerSoftOff, PowerError, PowerNone}
}

// IsPowerTarget reports whether p is a valid target of a power request.
func IsPowerTarget(p PowerState) bool {
	switch p {
	case PowerOn, PowerOff, PowerReboot, PowerSoftOff, PowerSoftReboot:
		return true
	}
	return false
}

// ParsePowerTarget returns the power target named s, or a *PowerStateError
// (errors.Is ErrUnknownPowerState) listing the accepted targets.
func ParsePowerTarget(s string) (PowerState, error) {
	p := PowerState(s)
	if !IsPowerTarget(p) {
		return PowerNone, &PowerStateError{Value: s, Accepted: PowerTargets()}
	}
	return p, nil
}

// ParsePowerState returns the recorded power state named s (the empty
// string is PowerNone), or a *PowerStateError listing the accepted values.
func ParsePowerState(s string) (PowerState, error) {
	p := PowerState(s)
	if IsPowerTarget(p) || p == PowerError || p == PowerNone {
		return p, nil
	}
	return PowerNone, &PowerStateError{Value: s, Accepted: PowerStates()}
}
