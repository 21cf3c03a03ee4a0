package ironicapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// provisionMachine is Ironic's provision state machine, built once: a
// Machine is immutable and safe for concurrent use, and building one
// costs about 0.1 ms, too much for every provision request.
var provisionMachine = sync.OnceValue(statemachine.NewProvisionMachine)

func (h *Handler) nodeStateRoutes() {
	h.handle("GET /v1/nodes/{node}/states", route{}, h.getNodeStates)
	h.handle("PUT /v1/nodes/{node}/states/provision", route{maxBody: h.opts.MaxProvisionBodyBytes}, h.putProvisionState)
	h.handle("PUT /v1/nodes/{node}/states/power", route{}, h.putPowerState)
	h.handle("GET /v1/nodes/{node}/states/console", route{}, h.getConsole)
	h.handle("PUT /v1/nodes/{node}/states/console", route{}, h.putConsole)
	// The legacy form Ironic's routing still serves (the console
	// controller reached through /v1/nodes/states with the node last).
	h.handle("GET /v1/nodes/states/console/{node}", route{}, h.getConsole)
	h.handle("PUT /v1/nodes/states/console/{node}", route{}, h.putConsole)
}

// statesLocation is the Location header of an accepted state change: the
// node's states resource under the identifier the client used, as Ironic
// builds it.
func (rq *request) statesLocation(suffix string) {
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/nodes/"+rq.r.PathValue("node")+"/states"+suffix)
}

// GET /v1/nodes/{node}/states: the node's states, with raid_config and
// target_raid_config from 1.12 and boot_mode and secure_boot from 1.75.
func (h *Handler) getNodeStates(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	m := n.Masked()
	out := map[string]any{
		"console_enabled":        m.ConsoleEnabled,
		"last_error":             nullable(m.LastError),
		"power_state":            nullable(m.PowerState),
		"provision_state":        rq.apiProvisionState(m.ProvisionState),
		"target_power_state":     nullable(m.TargetPowerState),
		"target_provision_state": nullable(m.TargetProvisionState),
		"provision_updated_at":   timestamp(m.ProvisionUpdatedAt),
	}
	if rq.v.AtLeast(12) {
		out["raid_config"] = object(m.RAIDConfig)
		out["target_raid_config"] = object(m.TargetRAIDConfig)
	}
	if rq.v.AtLeast(75) {
		out["boot_mode"] = nullable(m.BootMode)
		var sb any
		if m.SecureBoot != nil {
			sb = *m.SecureBoot
		}
		out["secure_boot"] = sb
	}
	return rq.reply(http.StatusOK, out)
}

// provisionBody is the body of PUT /v1/nodes/{node}/states/provision. The
// raw fields keep their JSON so their types can be checked as Ironic's
// argument validation does; the configdrive is apart (configDriveArg).
type provisionBody struct {
	Target         json.RawMessage `json:"target"`
	CleanSteps     json.RawMessage `json:"clean_steps"`
	DeploySteps    json.RawMessage `json:"deploy_steps"`
	ServiceSteps   json.RawMessage `json:"service_steps"`
	RescuePassword json.RawMessage `json:"rescue_password"`
	DisableRamdisk json.RawMessage `json:"disable_ramdisk"`
	Runbook        json.RawMessage `json:"runbook"`
}

// provisionKeys are the keys a provision request may carry.
var provisionKeys = map[string]bool{
	"target": true, "configdrive": true, "clean_steps": true, "deploy_steps": true,
	"service_steps": true, "rescue_password": true, "disable_ramdisk": true, "runbook": true,
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// rawString decodes an optional string field (nil when absent or null).
func rawString(field string, raw json.RawMessage) (*string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if field == "rescue_password" {
			// A secret, even malformed, is never echoed.
			return nil, badRequest("Invalid input for field/attribute %s. Wrong type. Expected a string.", field)
		}
		return nil, badRequest("Invalid input for field/attribute %s. Value: %s. Wrong type. Expected a string.", field, truncateRaw(raw))
	}
	return &s, nil
}

// rawList checks that an optional steps field is a list, and returns its
// JSON (nil when absent, null or empty: Ironic treats an empty list as no
// steps).
func rawList(field string, raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	var l []json.RawMessage
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, badRequest("Invalid input for field/attribute %s. Value: %s. Wrong type. Expected a list.", field, truncateRaw(raw))
	}
	if len(l) == 0 {
		return nil, nil
	}
	return raw, nil
}

func truncateRaw(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 64 {
		s = s[:61] + "..."
	}
	return s
}

// emptyConfigDrive reports whether a configdrive value is absent, null,
// "" or {}: Ironic treats them all as no config drive.
func emptyConfigDrive(raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch t := v.(type) {
	case string:
		return t == ""
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// b64Alphabet is what a config drive string that is not a URL may hold
// (base64 and the white space base64 text is wrapped with).
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n\r\t "

// checkConfigDrive applies Ironic's check_allow_configdrive: which
// targets take a config drive, its form, and the versions of the object
// form (1.56) and of vendor_data (1.59).
func (rq *request) checkConfigDrive(target string, cd *configDriveArg) error {
	if cd.empty() {
		return nil
	}
	raw := cd.raw
	var v any
	if cd.file == nil {
		if err := json.Unmarshal(raw, &v); err != nil {
			return badRequest("Invalid configdrive format: %v", err)
		}
	}
	allowed := []string{string(statemachine.VerbActive)}
	if rq.v.AtLeast(35) {
		allowed = append(allowed, string(statemachine.VerbRebuild))
	}
	ok := false
	for _, a := range allowed {
		ok = ok || a == target
	}
	if !ok {
		return badRequest("Adding a config drive is only supported when setting provision state to %s", strings.Join(allowed, ", "))
	}
	if cd.file != nil {
		// A string, checked as it was read.
		if !cd.url && cd.nonB64 {
			return badRequest("Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string")
		}
		return nil
	}
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			switch k {
			case "meta_data", "network_data", "vendor_data":
				if _, isObj := val.(map[string]any); !isObj {
					return badRequest("Invalid configdrive format: %s must be an object", k)
				}
			case "user_data":
				switch val.(type) {
				case nil, string, []any, map[string]any:
				default:
					return badRequest("Invalid configdrive format: user_data must be an object, an array, a string or null")
				}
			default:
				return badRequest("Invalid configdrive format: Additional properties are not allowed ('%s' was unexpected)", k)
			}
		}
		if !rq.v.AtLeast(56) {
			return badRequest("Providing a JSON object for configdrive is only supported starting with API version 1.56")
		}
		if _, has := t["vendor_data"]; has && !rq.v.AtLeast(59) {
			return badRequest("Providing vendor_data in configdrive is only supported starting with API version 1.59")
		}
	case string:
		if strings.Contains(t, "://") {
			return nil
		}
		if strings.IndexFunc(t, func(r rune) bool { return !strings.ContainsRune(b64Alphabet, r) }) >= 0 {
			return badRequest("Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string")
		}
	default:
		return badRequest("Invalid configdrive format: %s is not valid under any of the given schemas", truncateRaw(raw))
	}
	return nil
}

// minVerbVersions are the microversions below which a verb is a 406
// (Ironic's MIN_VERB_VERSIONS; service and unhold are checked later in
// the request, as Ironic does).
var minVerbVersions = map[string]int{
	"manage": 4, "provide": 4, "inspect": 6, "abort": 13, "clean": 15, "adopt": 17,
	"rescue": 38, "unrescue": 38, "deploy": 73, "undeploy": 73,
}

// invalidState is Ironic's InvalidStateRequested (400).
func invalidState(action, node string, state any) *Error {
	s := "None"
	switch v := state.(type) {
	case string:
		if v != "" {
			s = v
		}
	case statemachine.State:
		if v != "" {
			s = string(v)
		}
	case statemachine.PowerState:
		if v != "" {
			s = string(v)
		}
	}
	return badRequest("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", action, node, s)
}

// verbError maps an error from a conductor verb to Ironic's answer: a
// refused transition is InvalidStateRequested, a lock NodeLocked, the
// concurrency limit Ironic's ConcurrentActionLimit text; the rest goes
// through toError.
func verbError(action string, n *baremetal.Node, err error) error {
	var (
		te     *statemachine.TransitionError
		locked *baremetal.NodeLockedError
		limit  *conductor.ConcurrentActionLimitError
	)
	switch {
	case errors.As(err, &locked):
		return nodeLocked(n.UUID, locked.Holder)
	case errors.As(err, &limit):
		return &Error{Status: http.StatusServiceUnavailable, RetryAfter: 1, Message: "Unable to process request at this time. " +
			"The concurrent action limit for " + limit.Action + " has been reached. Please try again later."}
	case errors.As(err, &te):
		return invalidState(action, n.UUID, te.State)
	case errors.Is(err, steps.ErrInvalidSteps), errors.Is(err, steps.ErrStepNotAllowed):
		return &Error{Status: http.StatusBadRequest, Message: sentence(stripInternal(err.Error())), detail: err.Error()}
	}
	return err
}

// PUT /v1/nodes/{node}/states/provision: validated as Ironic's provision
// controller does, in its order, then handed to the conductor verb;
// 202 with the Location of the node's states.
func (h *Handler) putProvisionState(rq *request) error {
	// The body is read as a stream: a configdrive string, which may be
	// tens of megabytes, goes to a temporary file, removed on every path.
	var cd configDriveArg
	defer cd.close()
	doc, err := rq.readProvisionBody(&cd)
	if err != nil {
		return err
	}
	body := provisionBody{Target: doc["target"], CleanSteps: doc["clean_steps"],
		DeploySteps: doc["deploy_steps"], ServiceSteps: doc["service_steps"], RescuePassword: doc["rescue_password"],
		DisableRamdisk: doc["disable_ramdisk"], Runbook: doc["runbook"]}
	targetp, err := rawString("target", body.Target)
	if err != nil {
		return err
	}
	if targetp == nil {
		return badRequest("Missing argument: \"target\"")
	}
	target := *targetp
	rescuePassword, err := rawString("rescue_password", body.RescuePassword)
	if err != nil {
		return err
	}
	runbook, err := rawString("runbook", body.Runbook)
	if err != nil {
		return err
	}
	cleanSteps, err := rawList("clean_steps", body.CleanSteps)
	if err != nil {
		return err
	}
	deploySteps, err := rawList("deploy_steps", body.DeploySteps)
	if err != nil {
		return err
	}
	serviceSteps, err := rawList("service_steps", body.ServiceSteps)
	if err != nil {
		return err
	}
	var disableRamdisk *bool
	if !isNull(body.DisableRamdisk) {
		var v any
		_ = json.Unmarshal(body.DisableRamdisk, &v)
		b, err := asBool("", "disable_ramdisk", v)
		if err != nil {
			return badRequest("Invalid input for field/attribute disable_ramdisk. Value: %s. Wrong type. Expected a boolean.", truncateRaw(body.DisableRamdisk))
		}
		disableRamdisk = &b
	}

	n, err := rq.node()
	if err != nil {
		return err
	}
	if minor, ok := minVerbVersions[target]; ok && !rq.v.AtLeast(minor) {
		return notAcceptable("Request not acceptable.")
	}
	if (target == "active" || target == "rebuild") && n.Maintenance {
		return badRequest("The provisioning operation can't be performed on node %s because it's in maintenance mode.", n.UUID)
	}
	event := statemachine.Event(target)
	if v, err := statemachine.ParseVerb(target); err == nil {
		event = v.Event()
	}
	if !provisionMachine().Allows(n.ProvisionState, event) {
		if n.Reservation != "" {
			return nodeLocked(n.UUID, n.Reservation)
		}
		return invalidState(target, n.UUID, n.ProvisionState)
	}
	if err := rq.checkConfigDrive(target, &cd); err != nil {
		return err
	}
	runbookName := ""
	if runbook != nil && *runbook != "" {
		if !rq.v.AtLeast(92) {
			return notAcceptable("Request not acceptable.")
		}
		if target != "clean" && target != "service" {
			return badRequest("\"runbook\" is only valid when setting target provision state to clean or service")
		}
		rb, err := h.store.Runbooks().Get(rq.ctx, *runbook)
		if err != nil {
			return notFoundAs(err, "Runbook %s could not be found.", *runbook)
		}
		if err := rq.runbookApproved(rb, n); err != nil {
			return err
		}
		runbookName = *runbook
	}
	if disableRamdisk != nil {
		switch target {
		case "clean":
			if !rq.v.AtLeast(70) {
				return notAcceptable("disable_ramdisk is not acceptable in this API version")
			}
		case "service":
			if !rq.v.AtLeast(108) {
				return notAcceptable("disable_ramdisk is not acceptable in this API version")
			}
		default:
			return badRequest("disable_ramdisk is supported only with manual cleaning or servicing")
		}
	}
	if cleanSteps != nil && target != "clean" {
		return badRequest("\"clean_steps\" is only valid when setting target provision state to clean")
	}
	if deploySteps != nil {
		if !rq.v.AtLeast(69) {
			return notAcceptable("Request not acceptable. The minimal required API version should be 1.69")
		}
		if target != "active" && target != "rebuild" {
			return badRequest("\"deploy_steps\" is only valid when setting target provision state to active or rebuild")
		}
	}
	if rescuePassword != nil && target != "rescue" {
		return badRequest("\"rescue_password\" is only valid when setting target provision state to rescue")
	}
	if target == "abort" {
		if n.ProvisionState == statemachine.InspectWait && !rq.v.AtLeast(41) {
			return notAcceptable("Request not acceptable.")
		}
		if n.ProvisionState == statemachine.DeployWait && !rq.v.AtLeast(110) {
			return notAcceptable("Request not acceptable.")
		}
	}
	if target == "unhold" && !rq.v.AtLeast(85) {
		return notAcceptable("Request not acceptable.")
	}
	if serviceSteps != nil && target != "service" {
		return badRequest("\"service_steps\" is only valid when setting target provision state to service")
	}
	if target == "service" && !rq.v.AtLeast(87) {
		return notAcceptable("Request not acceptable.")
	}
	if err := h.doProvision(rq, n, target, &cd, cleanSteps, deploySteps, serviceSteps, rescuePassword, disableRamdisk, runbookName); err != nil {
		return verbError(target, n, err)
	}
	// The conductor is done with the file: it goes before the answer.
	cd.close()
	rq.statesLocation("")
	return rq.status(http.StatusAccepted)
}

// parseSteps parses a steps field with Ironic's step schema; a defect is
// a 400 naming the field.
func parseSteps(kind steps.Kind, field string, raw json.RawMessage) ([]steps.Step, error) {
	if raw == nil {
		return nil, nil
	}
	s, err := steps.ParseUserSteps(kind, raw)
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, detail: err.Error(),
			Message: fmt.Sprintf("Invalid %s: %s", field, stripInternal(baremetal.MaskText(err.Error())))}
	}
	return s, nil
}

// doProvision calls the conductor verb of target.
func (h *Handler) doProvision(rq *request, n *baremetal.Node, target string, configDrive *configDriveArg, cleanSteps, deploySteps, serviceSteps json.RawMessage, rescuePassword *string, disableRamdisk *bool, runbook string) error {
	ctx, id := rq.ctx, n.UUID
	switch target {
	case "active", "deploy", "rebuild":
		ds, err := parseSteps(steps.Deploy, "deploy_steps", deploySteps)
		if err != nil {
			return err
		}
		o := conductor.DeployOptions{DeploySteps: ds}
		switch {
		case configDrive.empty():
		case configDrive.file != nil:
			// The conductor checks the image as it streams from the
			// file, and reads it whole only to store it.
			o.ConfigDriveText = configDrive.file
		default:
			o.ConfigDrive = configDrive.raw
		}
		if target == "rebuild" {
			return h.c.Rebuild(ctx, id, o)
		}
		return h.c.Deploy(ctx, id, o)
	case "unrescue":
		return h.c.Unrescue(ctx, id)
	case "rescue":
		if rescuePassword == nil || strings.TrimSpace(*rescuePassword) == "" {
			return badRequest("A non-empty \"rescue_password\" is required when setting target provision state to rescue")
		}
		return h.c.Rescue(ctx, id, *rescuePassword)
	case "deleted", "undeploy":
		return h.c.Undeploy(ctx, id)
	case "inspect":
		return h.c.Inspect(ctx, id)
	case "clean":
		if cleanSteps == nil && runbook == "" {
			return badRequest("\"clean_steps\" is required when setting target provision state to clean")
		}
		cs, err := parseSteps(steps.Clean, "clean_steps", cleanSteps)
		if err != nil {
			return err
		}
		return h.c.Clean(ctx, id, cs, conductor.CleanOptions{DisableRamdisk: disableRamdisk != nil && *disableRamdisk, Runbook: runbook,
			RunbookByName: !rq.v.AtLeast(runbookTraitsVersion)})
	case "service":
		if serviceSteps == nil && runbook == "" {
			return badRequest("\"service_steps\" is required when setting target provision state to service")
		}
		ss, err := parseSteps(steps.Service, "service_steps", serviceSteps)
		if err != nil {
			return err
		}
		return h.c.Service(ctx, id, ss, conductor.ServiceOptions{DisableRamdisk: disableRamdisk != nil && *disableRamdisk, Runbook: runbook,
			RunbookByName: !rq.v.AtLeast(runbookTraitsVersion)})
	case "manage":
		return h.c.Manage(ctx, id)
	case "provide":
		return h.c.Provide(ctx, id)
	case "abort":
		return h.c.Abort(ctx, id)
	case "adopt":
		return h.c.Adopt(ctx, id)
	case "unhold":
		return h.c.Unhold(ctx, id)
	}
	return badRequest("The requested action \"%s\" could not be understood.", target)
}

// PUT /v1/nodes/{node}/states/power: {"target": ..., "timeout": s}; the
// soft targets and timeout from 1.27.
func (h *Handler) putPowerState(rq *request) error {
	var doc map[string]any
	if err := rq.decode(&doc); err != nil {
		return err
	}
	for k := range doc {
		if k != "target" && k != "timeout" {
			return badRequest("Unknown argument: \"%s\"", k)
		}
	}
	target, ok := doc["target"].(string)
	if !ok {
		if doc["target"] == nil {
			return badRequest("Missing argument: \"target\"")
		}
		return badRequest("Invalid input for field/attribute target. Expected a string.")
	}
	var timeout *int64
	if raw, has := doc["timeout"]; has && raw != nil {
		var t int64
		switch v := raw.(type) {
		case json.Number:
			i, err := v.Int64()
			if err != nil {
				return badRequest("Invalid input for field/attribute timeout. Value: %s. Expected an integer.", v)
			}
			t = i
		case string:
			num := json.Number(v)
			i, err := num.Int64()
			if err != nil {
				return badRequest("Invalid input for field/attribute timeout. Value: %q. Expected an integer.", v)
			}
			t = i
		default:
			return badRequest("Invalid input for field/attribute timeout. Expected an integer.")
		}
		timeout = &t
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	ps := statemachine.PowerState(target)
	soft := ps == statemachine.PowerSoftOff || ps == statemachine.PowerSoftReboot
	if (soft || (timeout != nil && *timeout != 0)) && !rq.v.AtLeast(27) {
		return notAcceptable("Request not acceptable.")
	}
	if timeout != nil && *timeout < 1 {
		return badRequest("timeout has to be positive integer")
	}
	ident := rq.r.PathValue("node")
	if !statemachine.IsPowerTarget(ps) {
		return invalidState(target, ident, n.PowerState)
	}
	if n.ProvisionState == statemachine.CleanWait || n.ProvisionState == statemachine.Cleaning {
		return invalidState(target, ident, n.ProvisionState)
	}
	if (ps == statemachine.PowerOff || ps == statemachine.PowerSoftOff) && n.DisablePowerOff {
		return Errorf(http.StatusConflict, "Failed to set node power state to %s.", target)
	}
	var d time.Duration
	if timeout != nil {
		const maxTimeout = int64(24 * time.Hour / time.Second)
		if *timeout > maxTimeout {
			return badRequest("timeout has to be at most %d seconds", maxTimeout)
		}
		d = time.Duration(*timeout) * time.Second
	}
	if err := h.c.SetPowerState(rq.ctx, n.UUID, ps, d); err != nil {
		return verbError(target, n, err)
	}
	rq.statesLocation("")
	return rq.status(http.StatusAccepted)
}

// GET /v1/nodes/{node}/states/console: {"console_enabled", "console_info"}.
func (h *Handler) getConsole(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	// As Ironic's get_console_information, a disabled console is
	// reported before the console interface is asked anything.
	if !n.ConsoleEnabled {
		return rq.reply(http.StatusOK, map[string]any{"console_enabled": false, "console_info": nil})
	}
	st, err := h.c.ConsoleInfo(rq.ctx, n.UUID)
	if errors.Is(err, conductor.ErrConsoleNotEnabled) {
		return rq.reply(http.StatusOK, map[string]any{"console_enabled": false, "console_info": nil})
	}
	if err != nil {
		return err
	}
	var info any
	if st.Info != nil {
		info = map[string]any{"type": st.Info.Type, "url": st.Info.URL}
	}
	return rq.reply(http.StatusOK, map[string]any{"console_enabled": true, "console_info": info})
}

// PUT /v1/nodes/{node}/states/console: {"enabled": bool}; 202.
func (h *Handler) putConsole(rq *request) error {
	var doc map[string]any
	if err := rq.decode(&doc); err != nil {
		return err
	}
	raw, ok := doc["enabled"]
	if !ok || raw == nil {
		return badRequest("Missing argument: \"enabled\"")
	}
	for k := range doc {
		if k != "enabled" {
			return badRequest("Unknown argument: \"%s\"", k)
		}
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	enabled, err := asBool(n.UUID, "enabled", raw)
	if err != nil {
		return badRequest("Invalid input for field/attribute enabled. Value: %v. Wrong type. Expected a boolean.", raw)
	}
	if err := h.c.SetConsoleMode(rq.ctx, n.UUID, enabled); err != nil {
		return verbError("console", n, err)
	}
	rq.statesLocation("/console")
	return rq.status(http.StatusAccepted)
}
