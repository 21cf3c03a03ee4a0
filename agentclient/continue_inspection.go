package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/google/uuid"
)

// MaxInspectionBodyBytes is the default bound of a continue_inspection
// body (HandlerConfig.MaxInspectionBodyBytes). An IPA inventory with LLDP
// data for a few dozen NICs and a hundred disks is a few hundred KiB, and
// IPA's compressed logs come on top; larger bodies get 413.
const MaxInspectionBodyBytes = 4 << 20

// InspectionRequest is a decoded POST /v1/continue_inspection body: the
// inventory, typed and as sent, every other top-level key as plugin data,
// and what the node is to be looked up by.
type InspectionRequest struct {
	// Inventory is the typed inventory. Fields Ironic does not validate
	// are parsed leniently: one of an unexpected type keeps its zero value
	// here (see InventoryTypeError) and its value in RawInventory.
	Inventory Inventory
	// RawInventory is the inventory object exactly as sent.
	RawInventory json.RawMessage
	// PluginData holds every top-level key but inventory; never nil.
	PluginData map[string]any
	// Addresses are the valid MAC addresses of the inventory's interfaces,
	// lower case and colon separated, in the order sent, without
	// duplicates.
	Addresses []string
	// InvalidAddresses are the mac_address values that are not MAC
	// addresses; Ironic drops them with a warning.
	InvalidAddresses []string
	// BMCAddresses are the non-empty bmc_address and bmc_v6address.
	BMCAddresses []string
	// InventoryTypeError describes the first inventory field, outside the
	// ones Ironic validates, whose JSON type does not match Inventory's
	// type for it (for example "inventory.cpu.count: expected int, got
	// string"), or is empty.
	InventoryTypeError string
}

// InspectionDataError is why a continue_inspection body was refused. It
// wraps ErrInvalidArgument.
type InspectionDataError struct {
	// Field is the JSON path of the offending value, e.g.
	// "inventory.interfaces[0].mac_address", or "body" for the body itself.
	Field string
	// Expected says what the field must hold, e.g. "a string".
	Expected string
	// Got describes what was found; empty when the field is missing.
	Got string
}

func (e *InspectionDataError) Error() string { return "agentclient: inspection data: " + e.Reason() }

// Reason is the error without the package prefix, as the API reports it.
func (e *InspectionDataError) Reason() string {
	if e.Got == "" {
		return fmt.Sprintf("%s is required: expected %s", e.Field, e.Expected)
	}
	return fmt.Sprintf("%s: expected %s, got %s", e.Field, e.Expected, e.Got)
}

// Unwrap makes the error match ErrInvalidArgument.
func (e *InspectionDataError) Unwrap() error { return ErrInvalidArgument }

// jsonKind names the JSON type of a syntactically valid value.
func jsonKind(raw []byte) string {
	b := bytes.TrimLeft(raw, " \t\r\n")
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// DecodeInspectionRequest parses a continue_inspection body and checks it
// as Ironic's schema does: a JSON object with an inventory object whose
// interfaces are a non-empty array of objects each with a string
// mac_address, and bmc_address and bmc_v6address strings when present.
// Other keys, in the body and in the inventory, are allowed. Errors are
// *InspectionDataError.
func DecodeInspectionRequest(body []byte) (InspectionRequest, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return InspectionRequest{}, &InspectionDataError{Field: "body", Expected: "a JSON object", Got: "malformed JSON (" + se.Error() + ")"}
		}
		return InspectionRequest{}, &InspectionDataError{Field: "body", Expected: "a JSON object", Got: jsonKind(body)}
	}
	if top == nil {
		return InspectionRequest{}, &InspectionDataError{Field: "body", Expected: "a JSON object", Got: "null"}
	}
	rawInv, ok := top["inventory"]
	if !ok {
		return InspectionRequest{}, &InspectionDataError{Field: "inventory", Expected: "an object"}
	}
	var inv map[string]json.RawMessage
	if k := jsonKind(rawInv); k != "an object" || json.Unmarshal(rawInv, &inv) != nil {
		return InspectionRequest{}, &InspectionDataError{Field: "inventory", Expected: "an object", Got: k}
	}
	req := InspectionRequest{RawInventory: rawInv}
	rawIfaces, ok := inv["interfaces"]
	if !ok {
		return InspectionRequest{}, &InspectionDataError{Field: "inventory.interfaces", Expected: "an array of at least one interface object"}
	}
	var ifaces []json.RawMessage
	if k := jsonKind(rawIfaces); k != "an array" || json.Unmarshal(rawIfaces, &ifaces) != nil {
		return InspectionRequest{}, &InspectionDataError{Field: "inventory.interfaces", Expected: "an array of at least one interface object", Got: k}
	}
	if len(ifaces) == 0 {
		return InspectionRequest{}, &InspectionDataError{Field: "inventory.interfaces", Expected: "an array of at least one interface object", Got: "an empty array"}
	}
	seen := make(map[string]bool, len(ifaces))
	for i, raw := range ifaces {
		field := fmt.Sprintf("inventory.interfaces[%d]", i)
		var iface map[string]json.RawMessage
		if k := jsonKind(raw); k != "an object" || json.Unmarshal(raw, &iface) != nil {
			return InspectionRequest{}, &InspectionDataError{Field: field, Expected: "an object", Got: k}
		}
		rawMAC, ok := iface["mac_address"]
		if !ok {
			return InspectionRequest{}, &InspectionDataError{Field: field + ".mac_address", Expected: "a string"}
		}
		var s string
		if k := jsonKind(rawMAC); k != "a string" || json.Unmarshal(rawMAC, &s) != nil {
			return InspectionRequest{}, &InspectionDataError{Field: field + ".mac_address", Expected: "a string", Got: k}
		}
		mac, valid := ParseMAC(s)
		switch {
		case !valid:
			req.InvalidAddresses = append(req.InvalidAddresses, s)
		case !seen[mac]:
			seen[mac] = true
			req.Addresses = append(req.Addresses, mac)
		}
	}
	for _, key := range [...]string{"bmc_address", "bmc_v6address"} {
		raw, ok := inv[key]
		if !ok {
			continue
		}
		var s string
		if k := jsonKind(raw); k != "a string" || json.Unmarshal(raw, &s) != nil {
			return InspectionRequest{}, &InspectionDataError{Field: "inventory." + key, Expected: "a string", Got: k}
		}
		if s != "" {
			req.BMCAddresses = append(req.BMCAddresses, s)
		}
	}
	if err := json.Unmarshal(rawInv, &req.Inventory); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return InspectionRequest{}, &InspectionDataError{Field: "inventory", Expected: "an inventory object", Got: err.Error()}
		}
		req.InventoryTypeError = fmt.Sprintf("inventory.%s: expected %s, got %s", te.Field, te.Type, te.Value)
	}
	req.PluginData = make(map[string]any, len(top)-1)
	for k, raw := range top {
		if k == "inventory" {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return InspectionRequest{}, &InspectionDataError{Field: k, Expected: "a JSON value", Got: err.Error()}
		}
		req.PluginData[k] = v
	}
	return req, nil
}

// truncateForLog shortens an untrusted string for a log line.
func truncateForLog(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// serveContinueInspection implements POST /v1/continue_inspection, routed
// only when the backend is an InspectionBackend. Checks, in order: ramdisk
// endpoints enabled (403); microversion (406; 404 below 1.83 except 1.1;
// node_uuid needs 1.84, else 404); node_uuid a UUID (400); body size (413);
// body shape (400); something to look up by (400); the node is found in
// "inspect wait" (404); from 1.84 its agent token exists or is created
// (409 when locked); the data is handed over (409, 404); then 202.
func (h *Handler) serveContinueInspection(w http.ResponseWriter, r *http.Request) {
	if h.cfg.DisableRamdiskEndpoints {
		h.refuse(w, r, http.StatusForbidden, "", "Ramdisk endpoints are disabled.")
		return
	}
	ver, ok := h.negotiate(w, r)
	if !ok {
		return
	}
	if ver.Less(versionContinueInspection) && ver != minAPIVersion {
		h.refuse(w, r, http.StatusNotFound, "", fmt.Sprintf("API version %s or newer is required.", versionContinueInspection))
		return
	}
	var nodeUUID string
	if raw := r.URL.Query().Get("node_uuid"); raw != "" {
		if ver.Less(versionInspectionLookup) {
			h.refuse(w, r, http.StatusNotFound, "", fmt.Sprintf("The node_uuid parameter requires API version %s or newer; the request used %s.", versionInspectionLookup, ver))
			return
		}
		id, err := uuid.Parse(raw)
		if err != nil || len(raw) != 36 {
			h.refuse(w, r, http.StatusBadRequest, "", fmt.Sprintf("Expected a UUID for node_uuid but received %q.", truncateForLog(raw)))
			return
		}
		nodeUUID = id.String()
	}
	limit := h.cfg.MaxInspectionBodyBytes
	body, err := readBody(w, r, limit)
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, nodeUUID, fmt.Sprintf("The inspection data is larger than the %d bytes allowed.", limit))
			return
		}
		h.refuse(w, r, http.StatusBadRequest, nodeUUID, "The inspection data could not be read.")
		return
	}
	req, err := DecodeInspectionRequest(body)
	if err != nil {
		msg := "Invalid inspection data."
		if de, ok := errors.AsType[*InspectionDataError](err); ok {
			msg = "Invalid inspection data: " + de.Reason() + "."
		}
		h.refuse(w, r, http.StatusBadRequest, nodeUUID, msg)
		return
	}
	if n := len(req.InvalidAddresses); n > 0 {
		shown := make([]string, 0, min(n, 8))
		for _, a := range req.InvalidAddresses[:min(n, 8)] {
			shown = append(shown, truncateForLog(a))
		}
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "agentclient: continue_inspection: dropping invalid MAC addresses",
			slog.Int("count", n), slog.Any("addresses", shown))
	}
	if nodeUUID == "" && len(req.Addresses) == 0 && len(req.BMCAddresses) == 0 {
		h.refuse(w, r, http.StatusBadRequest, "", "No lookup information provided: the inventory has no valid MAC address and no BMC address, and node_uuid was not given.")
		return
	}
	const notFound = "Node could not be found or is not waiting for inspection data."
	node, err := h.inspection.LookupInspectedNode(r.Context(), InspectionLookup{
		NodeUUID: nodeUUID, Addresses: req.Addresses, BMCAddresses: req.BMCAddresses,
	})
	if err != nil {
		h.inspectionFailure(w, r, "continue_inspection lookup", nodeUUID, notFound, err)
		return
	}
	if req.InventoryTypeError != "" {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "agentclient: continue_inspection: an inventory field has an unexpected type; it is kept only in the raw inventory",
			slog.String("node", node.UUID), slog.String("field", truncateForLog(req.InventoryTypeError)))
	}
	var answer any = map[string]string{"uuid": node.UUID}
	if ver.AtLeast(versionInspectionLookup) {
		// As Ironic: the token is ensured before the data is handed on,
		// so the ramdisk can go on to heartbeat (fast track) with it.
		// Should the hand-over then fail, a token created here is never
		// disclosed and the ramdisk's later lookup sees "******" (Ironic
		// has the same window), so ContinueInspection implementations
		// should wait for the node's lock, as Ironic's task manager
		// retries, rather than fail fast with ErrNodeLocked.
		candidate, err := NewToken(h.cfg.Rand)
		if err != nil {
			h.backendFailure(w, r, "continue_inspection", node.UUID, err)
			return
		}
		created, err := h.backend.EnsureAgentToken(r.Context(), node.UUID, candidate)
		if err != nil {
			h.inspectionFailure(w, r, "continue_inspection token", node.UUID, notFound, err)
			return
		}
		answer = h.lookupAnswer(r, node, candidate, created)
	}
	data := InspectionData{
		NodeUUID:     node.UUID,
		Inventory:    req.Inventory,
		RawInventory: req.RawInventory,
		PluginData:   req.PluginData,
		ReceivedAt:   h.clock.Now().UTC(),
	}
	if err := h.inspection.ContinueInspection(r.Context(), data); err != nil {
		h.inspectionFailure(w, r, "continue_inspection", node.UUID, notFound, err)
		return
	}
	writeJSON(w, http.StatusAccepted, answer)
}

// inspectionFailure maps a backend error of continue_inspection to its
// answer: locked 409, not found 404, cancelled 503, anything else 500.
func (h *Handler) inspectionFailure(w http.ResponseWriter, r *http.Request, op, node, notFound string, err error) {
	switch {
	case errors.Is(err, ErrNodeLocked) && node == "":
		h.refuse(w, r, http.StatusConflict, node, "The node is locked by another process; retry later.")
	case errors.Is(err, ErrNodeLocked):
		h.refuse(w, r, http.StatusConflict, node, fmt.Sprintf("Node %s is locked by another process; retry later.", node))
	case errors.Is(err, ErrNodeNotFound):
		h.refuse(w, r, http.StatusNotFound, node, notFound)
	case errors.Is(err, context.Canceled):
		h.refuse(w, r, http.StatusServiceUnavailable, node, "The request was cancelled.")
	default:
		h.backendFailure(w, r, op, node, err)
	}
}
