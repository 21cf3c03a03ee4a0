package ironicapi

import (
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
)

// driverKindVersions hides the interface fields of a driver's detail
// before the microversion that introduced the kind (storage 1.33,
// rescue 1.38, bios 1.40, firmware 1.86); the others exist from 1.30.
var driverKindVersions = map[driver.Kind]int{
	driver.KindStorage: 33, driver.KindRescue: 38, driver.KindBIOS: 40, driver.KindFirmware: 86,
}

func (h *Handler) driverRoutes() {
	h.handle("GET /v1/drivers", route{}, h.listDrivers)
	h.handle("GET /v1/drivers/{driver}", route{}, h.getDriver)
	h.handle("GET /v1/drivers/{driver}/properties", route{}, h.driverProperties)
	h.handle("GET /v1/drivers/{driver}/vendor_passthru/methods", route{}, h.driverVendorMethods)
	h.handle("GET /v1/drivers/{driver}/raid/logical_disk_properties", route{minVersion: 12}, h.driverLogicalDiskProperties)
}

// GET /v1/drivers/{driver}/raid/logical_disk_properties (1.12): the
// logical disk properties of the hardware type's default raid interface,
// as Ironic answers them; a hardware type whose default is no-raid (or
// that has none) is a 400, Ironic's UnsupportedDriverExtension.
func (h *Handler) driverLogicalDiskProperties(rq *request) error {
	name := rq.r.PathValue("driver")
	impl, err := h.opts.Drivers.DefaultInterface(name, driver.KindRAID)
	if errors.Is(err, driver.ErrHardwareTypeNotFound) {
		return notFound("Could not find the following driver(s) or hardware type(s): %s.", name)
	}
	if err != nil || impl == driver.NoRAID {
		return badRequest("Driver %s does not support raid (disabled or not implemented).", name)
	}
	return rq.reply(http.StatusOK, driver.RAIDLogicalDiskProperties())
}

// hardwareType is one enabled hardware type as the live conductors
// report it.
type hardwareType struct {
	name  string
	hosts []string
	// ifaces are the hardware-interface rows of the hosts for the type.
	ifaces []baremetal.HardwareInterface
}

// hardwareTypes lists the hardware types the live conductors enable,
// sorted by name, from the conductors table as Ironic's
// get_active_hardware_type_dict. When the table shows no live conductor
// with a hardware type (this conductor's keepalive is late, or the store
// lost its row) the handler's own registry answers instead, with this
// conductor as the host: an enabled hardware type is never hidden, which
// Metal3's readiness check depends on.
func (rq *request) hardwareTypes() ([]*hardwareType, error) {
	alive, err := rq.h.store.ListAliveConductors(rq.ctx, conductor.DefaultHeartbeatTimeout)
	if err != nil {
		return nil, err
	}
	byName := map[string]*hardwareType{}
	for _, c := range alive {
		rows, err := rq.h.store.ListHardwareInterfaces(rq.ctx, c.Hostname)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			ht := byName[r.HardwareType]
			if ht == nil {
				ht = &hardwareType{name: r.HardwareType}
				byName[r.HardwareType] = ht
			}
			if !slices.Contains(ht.hosts, c.Hostname) {
				ht.hosts = append(ht.hosts, c.Hostname)
			}
			ht.ifaces = append(ht.ifaces, r)
		}
	}
	if len(byName) == 0 {
		reg := rq.h.opts.Drivers
		en := reg.Enabled()
		for _, hw := range en.HardwareTypes {
			if _, ok := reg.HardwareType(hw); !ok {
				continue
			}
			ht := &hardwareType{name: hw, hosts: []string{rq.h.c.Hostname()}}
			for _, k := range driver.Kinds() {
				def, _ := reg.DefaultInterface(hw, k)
				for _, name := range en.Interfaces[k] {
					ht.ifaces = append(ht.ifaces, baremetal.HardwareInterface{HardwareType: hw, InterfaceType: string(k), InterfaceName: name, Default: name == def})
				}
			}
			byName[hw] = ht
		}
	}
	out := make([]*hardwareType, 0, len(byName))
	for _, ht := range byName {
		sort.Strings(ht.hosts)
		out = append(out, ht)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// driverView is a hardware type as Ironic's API shows it.
func (rq *request) driverView(ht *hardwareType, detail bool) map[string]any {
	hosts := ht.hosts
	if hosts == nil {
		hosts = []string{}
	}
	view := map[string]any{
		"name":  ht.name,
		"hosts": hosts,
		"links": rq.links("drivers", ht.name),
	}
	if rq.v.AtLeast(14) {
		view["properties"] = rq.links("drivers", ht.name+"/properties")
	}
	if !rq.v.AtLeast(30) {
		return view
	}
	view["type"] = "dynamic"
	if !detail {
		return view
	}
	for _, k := range driver.Kinds() {
		if minor, ok := driverKindVersions[k]; ok && !rq.v.AtLeast(minor) {
			continue
		}
		var def any
		enabled := []string{}
		for _, r := range ht.ifaces {
			if r.InterfaceType != string(k) {
				continue
			}
			if !slices.Contains(enabled, r.InterfaceName) {
				enabled = append(enabled, r.InterfaceName)
			}
			if r.Default {
				def = r.InterfaceName
			}
		}
		view["default_"+string(k)+"_interface"] = def
		view["enabled_"+string(k)+"_interfaces"] = enabled
	}
	return view
}

// driverFields parses ?fields= (API 1.77): a field the driver view does
// not have at the request's version is a 400, as Ironic's
// check_for_invalid_fields on the version's view.
func (rq *request) driverFields() ([]string, error) {
	raw, ok := rq.r.URL.Query()["fields"]
	if !ok {
		return nil, nil
	}
	if !rq.v.AtLeast(77) {
		return nil, notAcceptable("Request not acceptable.")
	}
	allowed := map[string]int{"name": 1, "hosts": 1, "links": 1, "properties": 14, "type": 30}
	for _, k := range driver.Kinds() {
		minor := 30
		if m, ok := driverKindVersions[k]; ok {
			minor = m
		}
		allowed["default_"+string(k)+"_interface"] = minor
		allowed["enabled_"+string(k)+"_interfaces"] = minor
	}
	fields := queryList(raw)
	var invalid []string
	for _, f := range fields {
		if minor, ok := allowed[f]; !ok || !rq.v.AtLeast(minor) {
			invalid = append(invalid, f)
		}
	}
	if len(invalid) > 0 {
		return nil, badRequest("Field(s) \"%s\" are not valid", strings.Join(invalid, ", "))
	}
	return fields, nil
}

// GET /v1/drivers
func (h *Handler) listDrivers(rq *request) error {
	q := rq.r.URL.Query()
	fields, err := rq.driverFields()
	if err != nil {
		return err
	}
	detail := false
	if s, ok := q["detail"]; ok {
		if !rq.v.AtLeast(30) {
			return notAcceptable("Request not acceptable.")
		}
		if detail, err = queryBool("detail", s[0]); err != nil {
			return err
		}
	}
	if fields != nil && detail {
		return badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	typ, hasType := q["type"]
	if hasType && !rq.v.AtLeast(30) {
		return notAcceptable("Request not acceptable.")
	}
	out := []map[string]any{}
	if hasType && typ[0] != "classic" && typ[0] != "dynamic" {
		return badRequest(`"type" filter must be one of "classic" or "dynamic", if specified.`)
	}
	if !hasType || typ[0] == "dynamic" {
		// Anvil has hardware types only, as Ironic since Rocky: a
		// classic driver listing is empty.
		hts, err := rq.hardwareTypes()
		if err != nil {
			return err
		}
		for _, ht := range hts {
			out = append(out, filterView(rq.driverView(ht, detail), fields))
		}
	}
	return rq.reply(http.StatusOK, map[string]any{"drivers": out})
}

// driverNamed finds the enabled hardware type the path names.
func (rq *request) driverNamed() (*hardwareType, error) {
	name := rq.r.PathValue("driver")
	hts, err := rq.hardwareTypes()
	if err != nil {
		return nil, err
	}
	for _, ht := range hts {
		if ht.name == name {
			return ht, nil
		}
	}
	return nil, notFound("Could not find the following driver(s) or hardware type(s): %s.", name)
}

// GET /v1/drivers/{driver}
func (h *Handler) getDriver(rq *request) error {
	fields, err := rq.driverFields()
	if err != nil {
		return err
	}
	ht, err := rq.driverNamed()
	if err != nil {
		return err
	}
	return rq.reply(http.StatusOK, filterView(rq.driverView(ht, true), fields))
}

// GET /v1/drivers/{driver}/properties: the driver_info properties of the
// hardware type's default implementation of every kind, as Ironic's
// HardwareType.get_properties.
func (h *Handler) driverProperties(rq *request) error {
	name := rq.r.PathValue("driver")
	reg := h.opts.Drivers
	if _, err := reg.DefaultInterface(name, driver.KindPower); err != nil && errors.Is(err, driver.ErrHardwareTypeNotFound) {
		return notFound("Could not find the following driver(s) or hardware type(s): %s.", name)
	}
	props := map[string]string{}
	for _, k := range driver.Kinds() {
		impl, err := reg.DefaultInterface(name, k)
		if err != nil {
			continue
		}
		iface, ok := reg.Interface(k, impl)
		if !ok {
			continue
		}
		for _, p := range iface.Properties() {
			props[p.Name] = p.Description
		}
	}
	return rq.reply(http.StatusOK, props)
}

// GET /v1/drivers/{driver}/vendor_passthru/methods: Anvil's vendor
// interfaces have node methods only, so a known driver has none.
func (h *Handler) driverVendorMethods(rq *request) error {
	if _, err := rq.driverNamed(); err != nil {
		return err
	}
	return rq.reply(http.StatusOK, map[string]any{})
}
