package ironicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
)

// The node endpoints answered by the conductor's synchronous operations
// (see "Synchronous node operations" in package conductor): validate,
// management (boot device, NMI), the RAID target, BIOS settings,
// firmware components, vendor passthru and virtual media. Their shapes,
// status codes and microversions are Ironic's (api-ref and
// ironic/api/controllers/v1): validate and boot device exist from 1.1,
// states/raid from 1.12 (406 before), inject_nmi from 1.29, bios from
// 1.40 (?detail and ?fields, and the registry fields, from 1.74),
// firmware from 1.86, vmedia POST/DELETE from 1.89 and GET from 1.93.

// Microversions of the endpoints (Ironic's versions.py).
const (
	minorRAIDConfig   = 12
	minorInjectNMI    = 29
	minorBIOS         = 40
	minorBIOSRegistry = 74
	minorFirmware     = 86
	minorVmediaAttach = 89
	minorVmediaGet    = 93
)

func (h *Handler) nodeSyncRoutes() {
	h.handle("GET /v1/nodes/{node}/validate", route{}, h.validateNode)
	h.handle("GET /v1/nodes/validate", route{}, h.validateNodeQuery)
	h.handle("GET /v1/nodes/{node}/management/boot_device", route{}, h.getBootDevice)
	h.handle("PUT /v1/nodes/{node}/management/boot_device", route{}, h.setBootDevice)
	h.handle("GET /v1/nodes/{node}/management/boot_device/supported", route{}, h.supportedBootDevices)
	h.handle("PUT /v1/nodes/{node}/management/inject_nmi", route{minVersion: minorInjectNMI}, h.injectNMI)
	h.handle("PUT /v1/nodes/{node}/states/raid", route{}, h.setRAIDConfig)
	h.handle("GET /v1/nodes/{node}/bios", route{minVersion: minorBIOS}, h.listBIOS)
	h.handle("GET /v1/nodes/{node}/bios/{name}", route{minVersion: minorBIOS}, h.getBIOS)
	h.handle("GET /v1/nodes/{node}/firmware", route{minVersion: minorFirmware}, h.listFirmware)
	h.handle("GET /v1/nodes/{node}/vendor_passthru/methods", route{}, h.vendorMethods)
	h.handle("/v1/nodes/{node}/vendor_passthru", route{}, h.vendorPassthru)
	h.handle("POST /v1/nodes/{node}/vmedia", route{minVersion: minorVmediaAttach}, h.attachVmedia)
	h.handle("DELETE /v1/nodes/{node}/vmedia", route{minVersion: minorVmediaAttach}, h.detachVmedia)
	h.handle("GET /v1/nodes/{node}/vmedia", route{minVersion: minorVmediaGet}, h.getVmedia)
}

// syncError maps what toError does not know of the synchronous
// operations: a busy conductor (Ironic's NoFreeConductorWorker, 503).
func syncError(err error) error {
	if errors.Is(err, conductor.ErrNoFreeWorker) {
		return &Error{Status: http.StatusServiceUnavailable, RetryAfter: 1, detail: err.Error(),
			Message: "Requested action cannot be performed due to lack of free conductor workers."}
	}
	return err
}

// noQuery refuses query parameters an endpoint does not take, as Ironic's
// query schemas (additionalProperties false) do.
func (rq *request) noQuery(allowed ...string) error {
	for k := range rq.r.URL.Query() {
		if !slices.Contains(allowed, k) {
			return badRequest("Unexpected query parameter %s.", k)
		}
	}
	return nil
}

// decodeObject reads a JSON object body; keys outside allowed (nil: any)
// are a 400. An empty body is an empty object when emptyOK.
func (rq *request) decodeObject(emptyOK bool, allowed ...string) (map[string]any, error) {
	if emptyOK {
		body, err := io.ReadAll(rq.r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, Errorf(http.StatusRequestEntityTooLarge, "Request body is larger than %d bytes.", mbe.Limit)
			}
			return nil, badRequest("Cannot read the request body: %v", err)
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return map[string]any{}, nil
		}
		rq.r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var raw any
	if err := rq.decode(&raw); err != nil {
		return nil, err
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, badRequest("The request body must be a JSON object.")
	}
	if allowed != nil {
		for k := range m {
			if !slices.Contains(allowed, k) {
				return nil, badRequest("Unknown argument: \"%s\".", k)
			}
		}
	}
	return plainNumbers(m).(map[string]any), nil
}

// plainNumbers turns the json.Number values decode keeps into float64,
// the type a driver sees for a number read back from the store or across
// a plugin.
func plainNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if f, err := t.Float64(); err == nil {
			return f
		}
		return t.String()
	case map[string]any:
		for k, x := range t {
			t[k] = plainNumbers(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = plainNumbers(x)
		}
		return t
	}
	return v
}

// GET /v1/nodes/{node}/validate
func (h *Handler) validateNode(rq *request) error {
	return h.validate(rq, rq.r.PathValue("node"))
}

// GET /v1/nodes/validate?node=<ident> (and the deprecated node_uuid).
func (h *Handler) validateNodeQuery(rq *request) error {
	q := rq.r.URL.Query()
	ident := q.Get("node")
	if ident == "" {
		ident = q.Get("node_uuid")
	}
	if ident == "" {
		return badRequest("Missing argument: \"node\".")
	}
	return h.validate(rq, ident)
}

func (h *Handler) validate(rq *request, ident string) error {
	n, err := rq.nodeByIdent(ident)
	if err != nil {
		return err
	}
	res, err := h.c.Validate(rq.ctx, n.UUID)
	if err != nil {
		return err
	}
	out := make(map[string]any, len(res))
	for k, r := range res {
		entry := map[string]any{"result": r.Result}
		if !r.Result {
			entry["reason"] = r.Reason
		}
		out[k] = entry
	}
	return rq.reply(http.StatusOK, out)
}

// nodeByIdent is rq.node for an identifier that is not in the path.
func (rq *request) nodeByIdent(ident string) (*baremetal.Node, error) {
	if !rq.v.AtLeast(5) && !looksLikeUUID(ident) {
		return nil, notAcceptable("Request not acceptable.")
	}
	n, err := rq.h.store.GetNode(rq.ctx, ident)
	if err != nil {
		if e := toError(err); e.Status == http.StatusNotFound {
			return nil, notFound("Node %s could not be found.", ident)
		}
		return nil, err
	}
	return n, nil
}

// GET /v1/nodes/{node}/management/boot_device
func (h *Handler) getBootDevice(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	st, err := h.c.GetBootDevice(rq.ctx, n.UUID)
	if err != nil {
		return err
	}
	var persistent any
	if st.Persistent != nil {
		persistent = *st.Persistent
	}
	return rq.reply(http.StatusOK, map[string]any{"boot_device": nullable(st.Device), "persistent": persistent})
}

// PUT /v1/nodes/{node}/management/boot_device {"boot_device", "persistent"}
func (h *Handler) setBootDevice(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	body, err := rq.decodeObject(false, "boot_device", "persistent")
	if err != nil {
		return err
	}
	dev, ok := body["boot_device"].(string)
	if !ok || dev == "" {
		return badRequest("Invalid value for boot_device of node %s: expected a boot device name such as pxe or disk.", n.UUID)
	}
	persistent := false
	if v, ok := body["persistent"]; ok && v != nil {
		if persistent, err = asBool(n.UUID, "persistent", v); err != nil {
			return err
		}
	}
	if err := h.c.SetBootDevice(rq.ctx, n.UUID, driver.BootDevice(dev), persistent); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}

// GET /v1/nodes/{node}/management/boot_device/supported
func (h *Handler) supportedBootDevices(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	devs, err := h.c.SupportedBootDevices(rq.ctx, n.UUID)
	if err != nil {
		return err
	}
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		out = append(out, string(d))
	}
	return rq.reply(http.StatusOK, map[string]any{"supported_boot_devices": out})
}

// PUT /v1/nodes/{node}/management/inject_nmi (1.29)
func (h *Handler) injectNMI(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	if err := h.c.InjectNMI(rq.ctx, n.UUID); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}

// PUT /v1/nodes/{node}/states/raid: the body is the target RAID
// configuration ({} clears it). Before 1.12 Ironic answers 406 once the
// node is found; a node without a RAID interface is 404.
func (h *Handler) setRAIDConfig(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	if !rq.v.AtLeast(minorRAIDConfig) {
		return notAcceptable("Request not acceptable.")
	}
	cfg, err := rq.decodeObject(false)
	if err != nil {
		return err
	}
	if err := h.c.SetTargetRAIDConfig(rq.ctx, n.UUID, cfg); err != nil {
		if errors.Is(err, driver.ErrUnsupported) {
			return publicError(http.StatusNotFound, err)
		}
		return err
	}
	return rq.status(http.StatusNoContent)
}

// biosFieldVersions are the fields of a BIOS setting with the version
// that shows them (the registry fields at 1.74).
var biosFieldVersions = map[string]int{
	"name": minorBIOS, "value": minorBIOS, "created_at": minorBIOS, "updated_at": minorBIOS, "links": minorBIOS,
	"node_uuid": minorBIOSRegistry, "attribute_type": minorBIOSRegistry, "allowable_values": minorBIOSRegistry,
	"lower_bound": minorBIOSRegistry, "max_length": minorBIOSRegistry, "min_length": minorBIOSRegistry,
	"read_only": minorBIOSRegistry, "reset_required": minorBIOSRegistry, "unique": minorBIOSRegistry,
	"upper_bound": minorBIOSRegistry,
}

// biosRegistryFields are the fields ?detail=True (and GET of one setting
// at 1.74) shows, Ironic's _DEFAULT_FIELDS_WITH_REGISTRY.
var biosRegistryFields = []string{"name", "value", "attribute_type", "allowable_values", "lower_bound",
	"max_length", "min_length", "read_only", "reset_required", "unique", "upper_bound"}

// biosView is setting s of node uuid as Ironic shows it with fields
// (created_at, updated_at and links always). Anvil reads the settings
// through the driver rather than from a cache table, so created_at is
// the time of the read and updated_at is null.
func (rq *request) biosView(s driver.BIOSSetting, uuid, linkIdent string, fields []string, readAt time.Time) map[string]any {
	var lower, upper any
	if s.LowerBound != nil {
		lower = *s.LowerBound
	}
	if s.UpperBound != nil {
		upper = *s.UpperBound
	}
	allowable := s.AllowableValues
	if allowable == nil {
		allowable = []string{}
	}
	all := map[string]any{
		"name": s.Name, "value": s.Value, "node_uuid": uuid,
		"attribute_type": nullable(s.AttributeType), "allowable_values": allowable,
		"lower_bound": lower, "upper_bound": upper, "max_length": nil, "min_length": nil,
		"read_only": s.ReadOnly, "reset_required": s.ResetRequired, "unique": nil,
	}
	out := map[string]any{"created_at": timestamp(readAt), "updated_at": nil,
		"links": rq.links("nodes", linkIdent+"/bios/"+s.Name)}
	for _, f := range fields {
		if v, ok := all[f]; ok {
			out[f] = v
		}
	}
	return out
}

// biosSettings reads the node's settings; a node without a BIOS interface
// has none, as Ironic's empty table.
func (h *Handler) biosSettings(rq *request, uuid string) ([]driver.BIOSSetting, error) {
	settings, err := h.c.BIOSSettings(rq.ctx, uuid)
	if errors.Is(err, driver.ErrUnsupported) {
		return nil, nil
	}
	return settings, err
}

// GET /v1/nodes/{node}/bios (1.40; ?detail and ?fields 1.74)
func (h *Handler) listBIOS(rq *request) error {
	if err := rq.noQuery("detail", "fields"); err != nil {
		return err
	}
	q := rq.r.URL.Query()
	_, hasDetail := q["detail"]
	_, hasFields := q["fields"]
	if (hasDetail || hasFields) && !rq.v.AtLeast(minorBIOSRegistry) {
		if hasDetail {
			return badRequest("Invalid query parameter ?detail=%s received.", q.Get("detail"))
		}
		return badRequest("Invalid query parameter ?fields=%s received.", q.Get("fields"))
	}
	detail := false
	if hasDetail {
		b, ok := driver.ParseBool(q.Get("detail"))
		if !ok {
			return badRequest("Invalid value for detail: %s, expected a boolean.", q.Get("detail"))
		}
		detail = b
	}
	fields, err := rq.parseFields(biosFieldVersions)
	if err != nil {
		return err
	}
	if fields != nil && detail {
		return badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	switch {
	case detail:
		fields = biosRegistryFields
	case fields == nil:
		fields = []string{"name", "value"}
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	settings, err := h.biosSettings(rq, n.UUID)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]map[string]any, 0, len(settings))
	for _, s := range settings {
		out = append(out, rq.biosView(s, n.UUID, rq.r.PathValue("node"), fields, now))
	}
	return rq.reply(http.StatusOK, map[string]any{"bios": out})
}

// GET /v1/nodes/{node}/bios/{name} (1.40): {"<name>": {...}}
func (h *Handler) getBIOS(rq *request) error {
	if err := rq.noQuery(); err != nil {
		return err
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	name := rq.r.PathValue("name")
	settings, err := h.biosSettings(rq, n.UUID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(settings, func(s driver.BIOSSetting) bool { return s.Name == name })
	if i < 0 {
		return notFound("Node %s doesn't have a BIOS setting '%s'", n.UUID, name)
	}
	fields := []string{"name", "value"}
	if rq.v.AtLeast(minorBIOSRegistry) {
		fields = biosRegistryFields
	}
	return rq.reply(http.StatusOK, map[string]any{name: rq.biosView(settings[i], n.UUID, n.UUID, fields, time.Now())})
}

// firmwareFields are the fields of a firmware component (Ironic's
// _DEFAULT_RETURN_FIELDS) and ?fields may name.
// vendor, model and serial_number appear in 1.114
// (firmwareIdentityVersion): ?fields naming them before is a 400, as
// Ironic words it.
var firmwareFields = map[string]int{
	"component": minorFirmware, "initial_version": minorFirmware, "current_version": minorFirmware,
	"last_version_flashed": minorFirmware, "created_at": minorFirmware, "updated_at": minorFirmware,
	"vendor": minorFirmware, "model": minorFirmware, "serial_number": minorFirmware,
}

// firmwareIdentityVersion is the microversion (Ironic's 1.114) from which
// a firmware component carries vendor, model and serial_number.
const firmwareIdentityVersion = 114

// firmwareIdentityFields are 1.114's fields, in Ironic's order.
var firmwareIdentityFields = []string{"vendor", "model", "serial_number"}

// GET /v1/nodes/{node}/firmware (1.86)
func (h *Handler) listFirmware(rq *request) error {
	if err := rq.noQuery("fields", "detail"); err != nil {
		return err
	}
	fields, err := rq.parseFields(firmwareFields)
	if err != nil {
		return err
	}
	if fields != nil && rq.r.URL.Query().Has("detail") {
		if b, _ := driver.ParseBool(rq.r.URL.Query().Get("detail")); b {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
	}
	if !rq.v.AtLeast(firmwareIdentityVersion) {
		var newer []string
		for _, f := range firmwareIdentityFields {
			if slices.Contains(fields, f) {
				newer = append(newer, f)
			}
		}
		if len(newer) > 0 {
			slices.Sort(newer)
			return badRequest("Fields %s are not allowed in this API version. They require at least API version 1.%d.", strings.Join(newer, ", "), firmwareIdentityVersion)
		}
	}
	if fields == nil {
		fields = []string{"component", "initial_version", "current_version", "last_version_flashed"}
		if rq.v.AtLeast(firmwareIdentityVersion) {
			fields = append(fields, firmwareIdentityFields...)
		}
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	comps, err := h.c.FirmwareComponents(rq.ctx, n.UUID)
	if errors.Is(err, driver.ErrUnsupported) {
		comps, err = nil, nil
	}
	if err != nil {
		return err
	}
	now := timestamp(time.Now())
	out := make([]map[string]any, 0, len(comps))
	for _, c := range comps {
		all := map[string]any{"component": c.Component, "initial_version": c.InitialVersion,
			"current_version": c.CurrentVersion, "last_version_flashed": nullable(c.LastVersionFlashed),
			"vendor": nullable(c.Vendor), "model": nullable(c.Model), "serial_number": nullable(c.SerialNumber)}
		entry := map[string]any{"created_at": now, "updated_at": nil}
		for _, f := range fields {
			if v, ok := all[f]; ok {
				entry[f] = v
			}
		}
		out = append(out, entry)
	}
	return rq.reply(http.StatusOK, map[string]any{"firmware": out})
}

// GET /v1/nodes/{node}/vendor_passthru/methods: {name: metadata}
func (h *Handler) vendorMethods(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	ms, err := h.c.VendorMethods(rq.ctx, n.UUID)
	if err != nil {
		return err
	}
	out := make(map[string]any, len(ms))
	for _, m := range ms {
		out[m.Name] = vendorMethodView(m)
	}
	return rq.reply(http.StatusOK, out)
}

// vendorMethodView is a method's metadata as Ironic lists its vendor
// routes; Anvil's conductor runs every method under the node's
// reservation (Ironic's default require_exclusive_lock).
func vendorMethodView(m driver.VendorMethod) map[string]any {
	methods := m.HTTPMethods
	if methods == nil {
		methods = []string{}
	}
	return map[string]any{"http_methods": methods, "async": m.Async, "description": m.Description,
		"attach": m.AttachResponse, "require_exclusive_lock": true}
}

// maxVendorMethod bounds a passthru method name.
const maxVendorMethod = 255

// /v1/nodes/{node}/vendor_passthru?method=<name>, any HTTP method: the
// body (a JSON object, empty for none) goes to the method; 200 with the
// method's return value, 202 with no body for an asynchronous method, the
// raw value for a method whose response is attached.
func (h *Handler) vendorPassthru(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	method := rq.r.URL.Query().Get("method")
	if method == "" {
		return badRequest("Method not specified")
	}
	if len(method) > maxVendorMethod {
		return badRequest("Method name is longer than %d characters.", maxVendorMethod)
	}
	args := map[string]any{}
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		if args, err = rq.decodeObject(true); err != nil {
			return err
		}
	}
	res, async, err := h.c.VendorPassthru(rq.ctx, n.UUID, method, rq.r.Method, args)
	if err != nil {
		return syncError(err)
	}
	if async {
		return rq.status(http.StatusAccepted)
	}
	if attachedResponse(h, rq, n.UUID, method) {
		if s, ok := res.(string); ok {
			rq.wrote = true
			rq.w.Header().Set("Content-Type", "application/octet-stream")
			rq.w.WriteHeader(http.StatusOK)
			_, _ = rq.w.Write([]byte(s))
			return nil
		}
	}
	return rq.reply(http.StatusOK, res)
}

// attachedResponse reports whether method's response is attached raw.
func attachedResponse(h *Handler, rq *request, uuid, method string) bool {
	ms, err := h.c.VendorMethods(rq.ctx, uuid)
	if err != nil {
		return false
	}
	i := slices.IndexFunc(ms, func(m driver.VendorMethod) bool { return m.Name == method })
	return i >= 0 && ms[i].AttachResponse
}

// POST /v1/nodes/{node}/vmedia (1.89) {"device_type", "image_url",
// "image_download_source"}: 204 once the management interface is
// validated; the image is attached in the background, a failure landing
// in the node's last_error (Ironic's behaviour).
func (h *Handler) attachVmedia(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	body, err := rq.decodeObject(false, "device_type", "image_url", "image_download_source")
	if err != nil {
		return err
	}
	dev, _ := body["device_type"].(string)
	url, _ := body["image_url"].(string)
	if dev == "" || url == "" {
		return badRequest("device_type and image_url are required strings.")
	}
	src, ok := body["image_download_source"].(string)
	if _, present := body["image_download_source"]; present && !ok {
		return badRequest("image_download_source must be a string: http, local or swift.")
	}
	if scheme, _, _ := strings.Cut(url, ":"); !slices.Contains([]string{"http", "https", "nfs", "cifs", "smb"}, strings.ToLower(scheme)) || !strings.Contains(url, "://") {
		return badRequest("Unsupported or missing URL scheme: %s", scheme)
	}
	if err := h.c.AttachVirtualMedia(rq.ctx, n.UUID, dev, url, conductor.VirtualMediaOptions{DownloadSource: src}); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}

// DELETE /v1/nodes/{node}/vmedia[?device_types=a,b] (1.89)
func (h *Handler) detachVmedia(rq *request) error {
	if err := rq.noQuery("device_types"); err != nil {
		return err
	}
	n, err := rq.node()
	if err != nil {
		return err
	}
	var types []string
	for _, part := range rq.r.URL.Query()["device_types"] {
		for _, t := range strings.Split(part, ",") {
			if t = strings.TrimSpace(t); t != "" {
				types = append(types, t)
			}
		}
	}
	var invalid []string
	for _, t := range types {
		if !driver.VirtualMediaDevice(t).Valid() {
			invalid = append(invalid, t)
		}
	}
	if len(invalid) > 0 {
		return badRequest("Invalid device type(s) %s (valid are disk, cdrom, floppy)", strings.Join(invalid, ", "))
	}
	if err := h.c.DetachVirtualMedia(rq.ctx, n.UUID, types); err != nil {
		return err
	}
	return rq.status(http.StatusNoContent)
}

// GET /v1/nodes/{node}/vmedia (1.93): the devices, a JSON list of
// {media_types, inserted, image}.
func (h *Handler) getVmedia(rq *request) error {
	n, err := rq.node()
	if err != nil {
		return err
	}
	list, err := h.c.VirtualMediaState(rq.ctx, n.UUID)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(list))
	for _, m := range list {
		types := m.MediaTypes
		if types == nil {
			types = []string{}
		}
		out = append(out, map[string]any{"media_types": types, "inserted": m.Inserted, "image": baremetal.MaskText(m.Image)})
	}
	return rq.reply(http.StatusOK, out)
}
