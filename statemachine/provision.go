package statemachine

// The 30 states registered in Ironic's provision machine, with Ironic's
// exact strings. Ironic's constant name is given where it differs from the
// Go name.
const (
	// Enroll is the initial state of a new node: known, not yet verified.
	Enroll State = "enroll"
	// Verifying is the check of a node's BMC credentials.
	Verifying State = "verifying"
	// Manageable is a verified node that is not schedulable.
	Manageable State = "manageable"
	// Available is a clean, schedulable node.
	Available State = "available"
	// Active is a deployed node running a workload.
	Active State = "active"
	// Deploying is a deploy whose steps the conductor is running.
	Deploying State = "deploying"
	// DeployWait (Ironic's DEPLOYWAIT) waits for the ramdisk or an
	// asynchronous deploy step. Note the unusual string.
	DeployWait State = "wait call-back"
	// DeployFailed is a failed deploy (Ironic's DEPLOYFAIL).
	DeployFailed State = "deploy failed"
	// DeployHold is a deploy parked by a hold step.
	DeployHold State = "deploy hold"
	// Deleting is a tear-down in progress.
	Deleting State = "deleting"
	// Cleaning is a clean whose steps the conductor is running.
	Cleaning State = "cleaning"
	// CleanWait waits for the ramdisk or an asynchronous clean step.
	CleanWait State = "clean wait"
	// CleanFailed is a failed clean (Ironic's CLEANFAIL); its only exit is
	// manage.
	CleanFailed State = "clean failed"
	// CleanHold is a clean parked by a hold step.
	CleanHold State = "clean hold"
	// Error is a failed tear-down; it accepts only rebuild and delete.
	Error State = "error"
	// Inspecting is a synchronous inspection.
	Inspecting State = "inspecting"
	// InspectWait is an asynchronous (in-band) inspection.
	InspectWait State = "inspect wait"
	// InspectFailed is a failed inspection (Ironic's INSPECTFAIL).
	InspectFailed State = "inspect failed"
	// Adopting is the take-over of an already deployed machine.
	Adopting State = "adopting"
	// AdoptFailed is a failed adoption (Ironic's ADOPTFAIL).
	AdoptFailed State = "adopt failed"
	// Rescue is a node running the rescue ramdisk.
	Rescue State = "rescue"
	// Rescuing is a rescue in progress.
	Rescuing State = "rescuing"
	// RescueWait waits for the rescue ramdisk.
	RescueWait State = "rescue wait"
	// RescueFailed is a failed rescue (Ironic's RESCUEFAIL).
	RescueFailed State = "rescue failed"
	// Unrescuing is the return from rescue to active.
	Unrescuing State = "unrescuing"
	// UnrescueFailed is a failed unrescue (Ironic's UNRESCUEFAIL).
	UnrescueFailed State = "unrescue failed"
	// Servicing is a service whose steps the conductor is running on an
	// active node.
	Servicing State = "servicing"
	// ServiceWait waits for the ramdisk or an asynchronous service step.
	ServiceWait State = "service wait"
	// ServiceFailed is a failed service (Ironic's SERVICEFAIL).
	ServiceFailed State = "service failed"
	// ServiceHold is a service parked by a hold step.
	ServiceHold State = "service hold"
)

// The 18 events of Ironic's provision machine. EventDone, EventFail,
// EventWait, EventResume and EventHold are internal: the conductor raises
// them, never the API.
const (
	EventAbort    Event = "abort"
	EventAdopt    Event = "adopt"
	EventClean    Event = "clean"
	EventDelete   Event = "delete"
	EventDeploy   Event = "deploy"
	EventDone     Event = "done"
	EventFail     Event = "fail"
	EventHold     Event = "hold"
	EventInspect  Event = "inspect"
	EventManage   Event = "manage"
	EventProvide  Event = "provide"
	EventRebuild  Event = "rebuild"
	EventRescue   Event = "rescue"
	EventResume   Event = "resume"
	EventService  Event = "service"
	EventUnhold   Event = "unhold"
	EventUnrescue Event = "unrescue"
	EventWait     Event = "wait"
)

// ProvisionMachineName is the Name of the machine NewProvisionMachine
// builds.
const ProvisionMachineName = "ironic-provision"

// ProvisionDefinition returns a fresh copy of the definition of Ironic's
// provision machine: the 30 states with their stable flags and default
// targets, the 18 events, the 93 transitions in Ironic's order, and the
// manual-cleaning sticky target.
func ProvisionDefinition() Definition {
	stable := func(s State) StateSpec { return StateSpec{Name: s, Stable: true} }
	aiming := func(s, target State) StateSpec { return StateSpec{Name: s, Target: target} }
	return Definition{
		Name:    ProvisionMachineName,
		Initial: Enroll,
		States: []StateSpec{
			stable(Enroll),
			stable(Manageable),
			stable(Available),
			stable(Active),
			stable(Error),
			stable(Rescue),
			aiming(Verifying, Manageable),
			aiming(Deploying, Active),
			aiming(DeployWait, Active),
			aiming(DeployFailed, Active),
			aiming(DeployHold, Active),
			aiming(Cleaning, Available),
			aiming(CleanWait, Available),
			aiming(CleanFailed, Available),
			aiming(CleanHold, Available),
			aiming(Deleting, Available),
			aiming(Inspecting, Manageable),
			aiming(InspectFailed, Manageable),
			aiming(InspectWait, Manageable),
			aiming(Adopting, Active),
			aiming(AdoptFailed, Active),
			aiming(Rescuing, Rescue),
			aiming(RescueWait, Rescue),
			aiming(RescueFailed, Rescue),
			aiming(Unrescuing, Active),
			aiming(UnrescueFailed, Active),
			aiming(Servicing, Active),
			aiming(ServiceWait, Active),
			aiming(ServiceFailed, Active),
			aiming(ServiceHold, Active),
		},
		Events: []Event{
			EventAbort, EventAdopt, EventClean, EventDelete, EventDeploy,
			EventDone, EventFail, EventHold, EventInspect, EventManage,
			EventProvide, EventRebuild, EventRescue, EventResume,
			EventService, EventUnhold, EventUnrescue, EventWait,
		},
		Transitions: []Transition{
			// Deploy.
			{Available, EventDeploy, Deploying},
			{Deploying, EventFail, DeployFailed},
			{DeployFailed, EventRebuild, Deploying},
			{DeployFailed, EventDeploy, Deploying},
			{Deploying, EventWait, DeployWait},
			{Deploying, EventHold, DeployHold},
			{DeployWait, EventHold, DeployHold},
			{DeployWait, EventResume, Deploying},
			{DeployWait, EventFail, DeployFailed},
			{DeployHold, EventUnhold, DeployWait},
			{DeployHold, EventAbort, DeployFailed},
			{DeployWait, EventAbort, DeployFailed},
			{Deploying, EventDone, Active},
			{Active, EventRebuild, Deploying},
			// Tear-down and cleaning.
			{Active, EventDelete, Deleting},
			{DeployWait, EventDelete, Deleting},
			{DeployFailed, EventDelete, Deleting},
			{Deleting, EventFail, Error},
			{Deleting, EventClean, Cleaning},
			{Cleaning, EventDone, Available},
			{Cleaning, EventFail, CleanFailed},
			{CleanWait, EventFail, CleanFailed},
			{CleanWait, EventAbort, CleanFailed},
			{Cleaning, EventWait, CleanWait},
			{Cleaning, EventHold, CleanHold},
			{CleanWait, EventHold, CleanHold},
			{CleanWait, EventResume, Cleaning},
			{CleanHold, EventAbort, CleanFailed},
			{CleanHold, EventUnhold, CleanWait},
			{CleanFailed, EventManage, Manageable},
			{Manageable, EventProvide, Cleaning},
			{Manageable, EventClean, Cleaning},
			{Cleaning, EventManage, Manageable},
			{Available, EventManage, Manageable},
			{Error, EventRebuild, Deploying},
			{Error, EventDelete, Deleting},
			// Inspection.
			{Manageable, EventInspect, Inspecting},
			{Inspecting, EventDone, Manageable},
			{Inspecting, EventFail, InspectFailed},
			{Inspecting, EventWait, InspectWait},
			{InspectWait, EventDone, Manageable},
			{InspectWait, EventFail, InspectFailed},
			{InspectWait, EventAbort, InspectFailed},
			{InspectWait, EventResume, Inspecting},
			{InspectFailed, EventManage, Manageable},
			{InspectFailed, EventInspect, Inspecting},
			// Rescue.
			{Active, EventRescue, Rescuing},
			{Rescuing, EventDone, Rescue},
			{Rescuing, EventWait, RescueWait},
			{RescueWait, EventResume, Rescuing},
			{Rescue, EventRescue, Rescuing},
			{Rescue, EventDelete, Deleting},
			{RescueWait, EventFail, RescueFailed},
			{Rescuing, EventFail, RescueFailed},
			{RescueWait, EventAbort, RescueFailed},
			{RescueFailed, EventRescue, Rescuing},
			{RescueFailed, EventUnrescue, Unrescuing},
			{RescueFailed, EventDelete, Deleting},
			{RescueWait, EventDelete, Deleting},
			{Rescue, EventUnrescue, Unrescuing},
			{Unrescuing, EventDone, Active},
			{Unrescuing, EventFail, UnrescueFailed},
			{UnrescueFailed, EventRescue, Rescuing},
			{UnrescueFailed, EventUnrescue, Unrescuing},
			{UnrescueFailed, EventDelete, Deleting},
			// Enrollment and verification.
			{Enroll, EventManage, Verifying},
			{Verifying, EventDone, Manageable},
			{Verifying, EventFail, Enroll},
			// Adoption.
			{Manageable, EventAdopt, Adopting},
			{Adopting, EventDone, Active},
			{Adopting, EventFail, AdoptFailed},
			{AdoptFailed, EventAdopt, Adopting},
			{AdoptFailed, EventManage, Manageable},
			// Servicing.
			{Servicing, EventDone, Active},
			{Active, EventService, Servicing},
			{Servicing, EventFail, ServiceFailed},
			{Servicing, EventWait, ServiceWait},
			{Servicing, EventHold, ServiceHold},
			{ServiceWait, EventHold, ServiceHold},
			{ServiceHold, EventService, Servicing},
			{ServiceHold, EventUnhold, ServiceWait},
			{ServiceWait, EventResume, Servicing},
			{ServiceWait, EventFail, ServiceFailed},
			{ServiceHold, EventFail, ServiceFailed},
			{ServiceWait, EventAbort, ServiceFailed},
			{ServiceHold, EventAbort, ServiceFailed},
			{ServiceFailed, EventService, Servicing},
			{ServiceFailed, EventRescue, Rescuing},
			{ServiceFailed, EventWait, ServiceWait},
			{ServiceFailed, EventHold, ServiceHold},
			{ServiceFailed, EventDelete, Deleting},
			{ServiceFailed, EventAbort, Active},
			{ServiceWait, EventDelete, Deleting},
		},
		Sticky: []StickyTarget{
			{Target: Manageable, Within: []State{Cleaning, CleanWait, CleanHold, CleanFailed}},
		},
	}
}

// NewProvisionMachine builds Ironic's provision machine. The result is
// immutable and safe for concurrent use; build it once and share it.
func NewProvisionMachine() *Machine {
	m, err := New(ProvisionDefinition())
	if err != nil {
		// The definition is a constant of this package; a failure here
		// is a bug caught by the package's tests, never a runtime input.
		panic(err)
	}
	return m
}

// IsInternalEvent reports whether ev is raised only by the conductor (done,
// fail, wait, resume, hold) and never arrives from the API.
func IsInternalEvent(ev Event) bool {
	switch ev {
	case EventDone, EventFail, EventWait, EventResume, EventHold:
		return true
	}
	return false
}

// The derived state sets of Ironic's states.py. Each predicate is a fixed
// membership test; the matching *States function lists the members.

// IsStable reports whether s is one of Ironic's stable states (enroll,
// manageable, available, active, error, rescue).
func IsStable(s State) bool {
	switch s {
	case Enroll, Manageable, Available, Active, Error, Rescue:
		return true
	}
	return false
}

// StableStates lists Ironic's STABLE_STATES.
func StableStates() []State {
	return []State{Enroll, Manageable, Available, Active, Error, Rescue}
}

// IsUnstable reports whether s is in Ironic's UNSTABLE_STATES, the states
// with work actively running or awaited (used to classify notifications).
// Failure and hold states are neither stable nor unstable.
func IsUnstable(s State) bool {
	switch s {
	case Deploying, DeployWait, Cleaning, CleanWait, Verifying, Deleting,
		Inspecting, InspectWait, Adopting, Rescuing, RescueWait, Unrescuing,
		Servicing, ServiceWait:
		return true
	}
	return false
}

// UnstableStates lists Ironic's UNSTABLE_STATES.
func UnstableStates() []State {
	return []State{Deploying, DeployWait, Cleaning, CleanWait, Verifying, Deleting,
		Inspecting, InspectWait, Adopting, Rescuing, RescueWait, Unrescuing,
		Servicing, ServiceWait}
}

// IsFailure reports whether s is one of Ironic's FAILURE_STATES.
func IsFailure(s State) bool {
	switch s {
	case DeployFailed, CleanFailed, InspectFailed, RescueFailed,
		UnrescueFailed, AdoptFailed, ServiceFailed:
		return true
	}
	return false
}

// FailureStates lists Ironic's FAILURE_STATES.
func FailureStates() []State {
	return []State{DeployFailed, CleanFailed, InspectFailed, RescueFailed,
		UnrescueFailed, AdoptFailed, ServiceFailed}
}

// IsStuckTreatedAsFail reports whether a node found in s without a live
// reservation when a conductor starts gets the fail event
// (STUCK_STATES_TREATED_AS_FAIL): something was actively running and
// nobody runs it any more. Wait and hold states are deliberately absent.
func IsStuckTreatedAsFail(s State) bool {
	switch s {
	case Deploying, Cleaning, Verifying, Inspecting, Adopting, Rescuing,
		Unrescuing, Deleting, Servicing:
		return true
	}
	return false
}

// StuckTreatedAsFailStates lists Ironic's STUCK_STATES_TREATED_AS_FAIL.
func StuckTreatedAsFailStates() []State {
	return []State{Deploying, Cleaning, Verifying, Inspecting, Adopting,
		Rescuing, Unrescuing, Deleting, Servicing}
}

// UpdateAllowed reports whether s is in Ironic's UPDATE_ALLOWED_STATES.
// See NodeUpdatable for the rule the API applies with it.
func UpdateAllowed(s State) bool {
	switch s {
	case DeployFailed, Inspecting, InspectFailed, InspectWait, CleanFailed,
		Error, Verifying, AdoptFailed, RescueFailed, UnrescueFailed,
		Service, ServiceHold, ServiceFailed:
		return true
	}
	return false
}

// Service is Ironic's SERVICE constant ("service"). It is not a registered
// state of the machine, but UPDATE_ALLOWED_STATES lists it, so it is kept
// for exact membership.
const Service State = "service"

// UpdateAllowedStates lists Ironic's UPDATE_ALLOWED_STATES, including the
// unregistered "service".
func UpdateAllowedStates() []State {
	return []State{DeployFailed, Inspecting, InspectFailed, InspectWait,
		CleanFailed, Error, Verifying, AdoptFailed, RescueFailed,
		UnrescueFailed, Service, ServiceHold, ServiceFailed}
}

// NodeUpdatable applies the API's rule for a node update: it is refused
// while a transition is in progress, that is when the node has a target
// and its state is not in UPDATE_ALLOWED_STATES.
func NodeUpdatable(state, target State) bool {
	return target == NoState || UpdateAllowed(state)
}

// DeleteAllowed reports whether a node in s may be deleted
// (DELETE_ALLOWED_STATES: manageable, enroll, adopt failed). Ironic also
// allows available unless [conductor]allow_deleting_available_nodes is
// false; allowAvailable carries that option (Ironic's default is true).
func DeleteAllowed(s State, allowAvailable bool) bool {
	switch s {
	case Manageable, Enroll, AdoptFailed:
		return true
	case Available:
		return allowAvailable
	}
	return false
}

// DeleteAllowedStates lists Ironic's DELETE_ALLOWED_STATES (without the
// optional available).
func DeleteAllowedStates() []State {
	return []State{Manageable, Enroll, AdoptFailed}
}

// LookupAllowed reports whether an agent lookup is accepted for a node in s
// (LOOKUP_ALLOWED_STATES) when fast track is off.
func LookupAllowed(s State) bool {
	switch s {
	case Deploying, DeployWait, Cleaning, CleanWait, Inspecting, InspectWait,
		Rescuing, RescueWait, ServiceWait:
		return true
	}
	return false
}

// LookupAllowedStates lists Ironic's LOOKUP_ALLOWED_STATES.
func LookupAllowedStates() []State {
	return []State{Deploying, DeployWait, Cleaning, CleanWait, Inspecting,
		InspectWait, Rescuing, RescueWait, ServiceWait}
}

// FastTrackLookupAllowed reports whether an agent lookup is accepted for a
// node in s when fast track is on (FASTTRACK_LOOKUP_ALLOWED_STATES).
func FastTrackLookupAllowed(s State) bool {
	switch s {
	case Enroll, Manageable, Available, Deploying, DeployWait, Cleaning,
		CleanWait, Inspecting, InspectWait, Rescuing, RescueWait, Servicing,
		ServiceWait, ServiceHold:
		return true
	}
	return false
}

// FastTrackLookupAllowedStates lists Ironic's
// FASTTRACK_LOOKUP_ALLOWED_STATES.
func FastTrackLookupAllowedStates() []State {
	return []State{Enroll, Manageable, Available, Deploying, DeployWait,
		Cleaning, CleanWait, Inspecting, InspectWait, Rescuing, RescueWait,
		Servicing, ServiceWait, ServiceHold}
}

// PowerSyncExcluded reports whether the power-state sync skips a node in s
// (SYNC_EXCLUDED_STATES: wait call-back, clean wait, enroll, adopt failed).
func PowerSyncExcluded(s State) bool {
	switch s {
	case DeployWait, CleanWait, Enroll, AdoptFailed:
		return true
	}
	return false
}

// PowerSyncExcludedStates lists Ironic's SYNC_EXCLUDED_STATES.
func PowerSyncExcludedStates() []State {
	return []State{DeployWait, CleanWait, Enroll, AdoptFailed}
}
