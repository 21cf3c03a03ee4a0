package vmlab

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Firmware, BIOS and task resources of the lab's Redfish BMC.
const (
	rfUpdate      = rfRoot + "/UpdateService"
	rfInventory   = rfUpdate + "/FirmwareInventory"
	rfInvBIOS     = rfInventory + "/BIOS"
	rfInvBMC      = rfInventory + "/BMC"
	rfSimpleUpd   = rfUpdate + "/Actions/UpdateService.SimpleUpdate"
	rfTaskService = rfRoot + "/TaskService"
	rfTasks       = rfTaskService + "/Tasks"
	rfRegistries  = rfRoot + "/Registries"
	rfBIOSRegID   = "AnvilVMLabBiosRegistry.v1_0_0"
	rfBIOSReg     = rfRegistries + "/" + rfBIOSRegID
	rfBIOSRegFile = rfBIOSReg + "/Registry"
)

// Initial firmware versions of the lab's machines.
const (
	LabBIOSVersion = "SeaBIOS-lab-1.0"
	LabBMCVersion  = "anvil-vmlab-bmc-1.0"
)

// rfBIOSAttr is an attribute of the lab BIOS's registry.
type rfBIOSAttr struct {
	name, typ string
	values    []string // Enumeration
	readOnly  bool
	def       any
}

// rfBIOSAttrs is the lab BIOS's attribute registry and defaults.
var rfBIOSAttrs = []rfBIOSAttr{
	{name: "BootMode", typ: "Enumeration", values: []string{"Bios", "Uefi"}, readOnly: true, def: "Bios"},
	{name: "ProcVirtualization", typ: "Enumeration", values: []string{"Enabled", "Disabled"}, def: "Enabled"},
	{name: "NumLock", typ: "Enumeration", values: []string{"On", "Off"}, def: "On"},
	{name: "SerialConsoleBaud", typ: "Integer", def: 115200.0},
	{name: "AssetTag", typ: "String", def: ""},
}

// rfUpdateParams are the parameters SimpleUpdate takes.
var rfUpdateParams = []string{"ImageURI", "Targets", "TransferProtocol", "Username", "Password", "ForceUpdate"}

// rfFirmware is the BMC's firmware, BIOS settings and tasks: settings
// and a BIOS update are pending until the next reset, as a real BMC
// applies them at the machine's next boot. Guarded by rfService.mu.
type rfFirmware struct {
	versions   map[string]string // inventory URI -> version
	fwPending  map[string]string // inventory URI -> version at the next reset
	bios       map[string]any
	biosPend   map[string]any
	biosReset  bool // ResetBios pending
	etag       int  // of the pending settings
	tasks      map[string]map[string]any
	taskSeq    int
	wg         sync.WaitGroup // update downloads; Close waits
	fwSequence int
}

func (f *rfFirmware) init() {
	if f.versions != nil {
		return
	}
	f.versions = map[string]string{rfInvBIOS: LabBIOSVersion, rfInvBMC: LabBMCVersion}
	f.fwPending = map[string]string{}
	f.bios = map[string]any{}
	for _, a := range rfBIOSAttrs {
		f.bios[a.name] = a.def
	}
	f.tasks = map[string]map[string]any{}
}

// applyPendingLocked is the machine's boot: pending BIOS settings (or a
// BIOS reset to defaults) and staged firmware take effect. Called with
// s.mu held when the machine powers on.
func (s *rfService) applyPendingLocked() {
	f := &s.fw
	f.init()
	if f.biosReset {
		for _, a := range rfBIOSAttrs {
			f.bios[a.name] = a.def
		}
		f.biosReset = false
		s.event("BIOS reset to defaults applied")
	}
	for k, v := range f.biosPend {
		f.bios[k] = v
		s.event("BIOS %s = %v applied", k, v)
	}
	f.biosPend = nil
	for uri, v := range f.fwPending {
		f.versions[uri] = v
		s.event("firmware %s %s activated", path.Base(uri), v)
	}
	clear(f.fwPending)
}

// firmwareResource renders the firmware, BIOS, registry and task
// resources at p, or nil. Called with s.mu held.
func (s *rfService) firmwareResource(p string) map[string]any {
	f := &s.fw
	f.init()
	sys := s.systemPath()
	switch p {
	case rfUpdate:
		return map[string]any{
			"@odata.id": p, "@odata.type": "#UpdateService.v1_8_0.UpdateService", "Id": "UpdateService", "Name": "Update Service",
			"ServiceEnabled": true, "FirmwareInventory": odata(rfInventory),
			"Actions": map[string]any{"#UpdateService.SimpleUpdate": map[string]any{
				"target": rfSimpleUpd, "TransferProtocol@Redfish.AllowableValues": []string{"HTTP", "HTTPS"},
			}},
		}
	case rfInventory:
		return map[string]any{"@odata.id": p, "@odata.type": "#SoftwareInventoryCollection.SoftwareInventoryCollection", "Name": "Firmware Inventory",
			"Members": []any{odata(rfInvBIOS), odata(rfInvBMC)}, "Members@odata.count": 2}
	case rfInvBIOS, rfInvBMC:
		id := path.Base(p)
		return map[string]any{"@odata.id": p, "@odata.type": "#SoftwareInventory.v1_2_0.SoftwareInventory", "Id": id, "Name": id + " firmware",
			"Version": f.versions[p], "Updateable": true, "Status": map[string]any{"State": "Enabled", "Health": "OK"}}
	case rfTaskService:
		return map[string]any{"@odata.id": p, "@odata.type": "#TaskService.v1_1_0.TaskService", "Id": "TaskService", "Name": "Task Service",
			"ServiceEnabled": true, "Tasks": odata(rfTasks)}
	case rfTasks:
		var members []any
		for uri := range f.tasks {
			members = append(members, odata(uri))
		}
		return map[string]any{"@odata.id": p, "@odata.type": "#TaskCollection.TaskCollection", "Name": "Tasks",
			"Members": members, "Members@odata.count": len(members)}
	case rfRegistries:
		return map[string]any{"@odata.id": p, "@odata.type": "#MessageRegistryFileCollection.MessageRegistryFileCollection", "Name": "Registries",
			"Members": []any{odata(rfBIOSReg)}, "Members@odata.count": 1}
	case rfBIOSReg:
		return map[string]any{"@odata.id": p, "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile", "Id": rfBIOSRegID,
			"Name": "BIOS attribute registry", "Registry": rfBIOSRegID, "Languages": []string{"en"},
			"Location": []any{map[string]any{"Language": "en", "Uri": rfBIOSRegFile}}}
	case rfBIOSRegFile:
		var attrs []any
		for _, a := range rfBIOSAttrs {
			m := map[string]any{"AttributeName": a.name, "Type": a.typ, "ReadOnly": a.readOnly, "ResetRequired": true}
			if a.values != nil {
				var vs []any
				for _, v := range a.values {
					vs = append(vs, map[string]any{"ValueName": v})
				}
				m["Value"] = vs
			}
			attrs = append(attrs, m)
		}
		return map[string]any{"@odata.id": p, "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry", "Id": rfBIOSRegID,
			"Name": "BIOS attribute registry", "Language": "en", "RegistryVersion": "1.0.0", "OwningEntity": "Anvil vmlab",
			"RegistryEntries": map[string]any{"Attributes": attrs}}
	case sys + "/Bios":
		return map[string]any{"@odata.id": p, "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Bios", "Name": "BIOS Configuration Current Settings",
			"AttributeRegistry": rfBIOSRegID, "Attributes": clone(f.bios), "ResetBiosToDefaultsPending": f.biosReset,
			"@Redfish.Settings": map[string]any{"@odata.type": "#Settings.v1_3_0.Settings", "SettingsObject": odata(sys + "/Bios/Settings")},
			"Actions":           map[string]any{"#Bios.ResetBios": map[string]any{"target": sys + "/Bios/Actions/Bios.ResetBios"}}}
	case sys + "/Bios/Settings":
		return map[string]any{"@odata.id": p, "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Settings", "Name": "BIOS Configuration Pending Settings",
			"AttributeRegistry": rfBIOSRegID, "Attributes": clone(f.biosPend)}
	}
	if t, ok := f.tasks[p]; ok {
		return clone(t)
	}
	return nil
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// settingsETag is the pending settings' entity tag (gofish sends it
// back in If-Match).
func (s *rfService) settingsETag() string { return `W/"bios-settings-` + strconv.Itoa(s.fw.etag) + `"` }

// patchBIOSSettings stages BIOS settings for the next reset, refusing
// what the registry forbids: an unknown or read-only attribute, a value
// that is not one of an enumeration's, an integer that is not a whole
// number, a string that is not one; and a stale If-Match.
func (s *rfService) patchBIOSSettings(w http.ResponseWriter, r *http.Request, body map[string]any) {
	for k := range body {
		if k != "Attributes" && k != "@Redfish.SettingsApplyTime" {
			rfError(w, http.StatusBadRequest, "PropertyNotWritable", "the property "+k+" is not writable")
			return
		}
	}
	attrs, ok := body["Attributes"].(map[string]any)
	if !ok || len(attrs) == 0 {
		rfError(w, http.StatusBadRequest, "PropertyMissing", "Attributes must be an object with settings to change")
		return
	}
	for k, v := range attrs {
		i := slices.IndexFunc(rfBIOSAttrs, func(a rfBIOSAttr) bool { return a.name == k })
		if i < 0 {
			rfError(w, http.StatusBadRequest, "PropertyUnknown", "the BIOS has no attribute "+k)
			return
		}
		a := rfBIOSAttrs[i]
		if a.readOnly {
			rfError(w, http.StatusBadRequest, "PropertyNotWritable", "the BIOS attribute "+k+" is read-only")
			return
		}
		switch a.typ {
		case "Enumeration":
			if str, _ := v.(string); !slices.Contains(a.values, str) {
				rfError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("BIOS attribute %s: %v is not one of %v", k, v, a.values))
				return
			}
		case "Integer":
			if n, ok := v.(float64); !ok || n != float64(int64(n)) {
				rfError(w, http.StatusBadRequest, "PropertyValueTypeError", fmt.Sprintf("BIOS attribute %s: %v is not an integer", k, v))
				return
			}
		case "String":
			if _, ok := v.(string); !ok {
				rfError(w, http.StatusBadRequest, "PropertyValueTypeError", fmt.Sprintf("BIOS attribute %s: %v is not a string", k, v))
				return
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fw.init()
	if m := r.Header.Get("If-Match"); m != "" && m != s.settingsETag() {
		rfError(w, http.StatusPreconditionFailed, "PreconditionFailed", "the pending settings changed: If-Match "+m+" is stale")
		return
	}
	if s.fw.biosPend == nil {
		s.fw.biosPend = map[string]any{}
	}
	for k, v := range attrs {
		s.fw.biosPend[k] = v
		s.event("BIOS %s = %v pending", k, v)
	}
	s.fw.etag++
	w.WriteHeader(http.StatusNoContent)
}

// resetBIOS stages the BIOS defaults for the next reset.
func (s *rfService) resetBIOS(w http.ResponseWriter, body map[string]any) {
	if len(body) > 0 {
		rfError(w, http.StatusBadRequest, "ActionParameterUnknown", "Bios.ResetBios takes no parameters")
		return
	}
	s.mu.Lock()
	s.fw.init()
	s.fw.biosReset, s.fw.biosPend = true, nil
	s.fw.etag++
	s.event("BIOS reset to defaults pending")
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// simpleUpdate starts a firmware update: a task that downloads the image
// (bounded in size and time, like virtual media) and, when it has it,
// stages it: the BIOS's version changes at the next reset (the task
// says a reset is required), the BMC's at once. The version is the
// image's file name without its extension. A download that fails ends
// the task in Exception with the Update registry's TransferFailed.
func (s *rfService) simpleUpdate(w http.ResponseWriter, body map[string]any) {
	for k := range body {
		if !slices.Contains(rfUpdateParams, k) {
			rfError(w, http.StatusBadRequest, "ActionParameterUnknown", "unknown parameter "+k+" of UpdateService.SimpleUpdate")
			return
		}
	}
	image, _ := body["ImageURI"].(string)
	u, err := url.Parse(image)
	if image == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		rfError(w, http.StatusBadRequest, "ActionParameterValueFormatError", "ImageURI must be an http(s) URL without credentials")
		return
	}
	if tp, ok := body["TransferProtocol"]; ok && tp != "HTTP" && tp != "HTTPS" {
		rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", "TransferProtocol must be HTTP or HTTPS")
		return
	}
	targets := []string{rfInvBIOS}
	if raw, ok := body["Targets"]; ok {
		list, isList := raw.([]any)
		if !isList {
			rfError(w, http.StatusBadRequest, "ActionParameterValueTypeError", "Targets must be a list of inventory URIs")
			return
		}
		if len(list) > 0 {
			targets = nil
		}
		for _, t := range list {
			ts, _ := t.(string)
			if ts != rfInvBIOS && ts != rfInvBMC {
				rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", fmt.Sprintf("target %v is not an updateable member of %s", t, rfInventory))
				return
			}
			targets = append(targets, ts)
		}
	}
	s.mu.Lock()
	s.fw.init()
	s.fw.taskSeq++
	id := strconv.Itoa(s.fw.taskSeq)
	uri := rfTasks + "/" + id
	s.fw.tasks[uri] = map[string]any{"@odata.id": uri, "@odata.type": "#Task.v1_4_3.Task", "Id": id, "Name": "Firmware update",
		"TaskState": "Running", "TaskStatus": "OK", "PercentComplete": 0, "StartTime": time.Now().UTC().Format(time.RFC3339), "Messages": []any{}}
	s.event("update %s of %v started (task %s)", image, targets, id)
	s.fw.wg.Add(1)
	s.mu.Unlock()
	go s.runUpdate(uri, image, targets) // ends when the download does; Close cancels it
	w.Header().Set("Location", uri)
	writeRF(w, http.StatusAccepted, map[string]any{"@odata.id": uri, "@odata.type": "#Task.v1_4_3.Task", "Id": id, "TaskState": "Running"})
}

func (s *rfService) runUpdate(uri, image string, targets []string) {
	defer s.fw.wg.Done()
	s.mu.Lock()
	s.fw.fwSequence++
	file := filepath.Join(s.mediaDir, fmt.Sprintf("fw-%d.bin", s.fw.fwSequence))
	s.mu.Unlock()
	size, err := s.download(image, file)
	os.Remove(file)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.fw.tasks[uri]
	t["EndTime"] = time.Now().UTC().Format(time.RFC3339)
	if err != nil {
		if s.ctx.Err() != nil {
			err = context.Canceled
		}
		t["TaskState"], t["TaskStatus"] = "Exception", "Critical"
		t["Messages"] = []any{map[string]any{"@odata.type": "#Message.v1_1_1.Message", "MessageId": "Update.1.0.TransferFailed",
			"Message": "The transfer of " + image + " failed: " + err.Error(), "MessageArgs": []any{image}, "Severity": "Critical"}}
		s.event("update %s failed: %v", image, err)
		return
	}
	version := path.Base(image)
	version = version[:len(version)-len(path.Ext(version))]
	var msgs []any
	for _, target := range targets {
		if target == rfInvBIOS {
			s.fw.fwPending[target] = version
			msgs = append(msgs, map[string]any{"@odata.type": "#Message.v1_1_1.Message", "MessageId": "Base.1.8.ResetRequired",
				"Message": "The BIOS update to " + version + " takes effect at the next system reset.", "MessageArgs": []any{target}, "Severity": "Warning"})
			continue
		}
		s.fw.versions[target] = version
		msgs = append(msgs, map[string]any{"@odata.type": "#Message.v1_1_1.Message", "MessageId": "Update.1.0.UpdateSuccessful",
			"Message": target + " was updated to " + version + ".", "MessageArgs": []any{target}, "Severity": "OK"})
	}
	t["TaskState"], t["PercentComplete"], t["Messages"] = "Completed", 100, msgs
	s.event("update %s (%d bytes) staged as %s", image, size, version)
}

// FirmwareVersions returns the versions the BMC reports now, by
// inventory id (BIOS, BMC).
func (m *RedfishMachine) FirmwareVersions() map[string]string { return m.svc.firmwareVersions() }

// BIOSSettings returns the machine's current BIOS settings.
func (m *RedfishMachine) BIOSSettings() map[string]any { return m.svc.biosSettings() }

func (s *rfService) firmwareVersions() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fw.init()
	out := map[string]string{}
	for uri, v := range s.fw.versions {
		out[path.Base(uri)] = v
	}
	return out
}

func (s *rfService) biosSettings() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fw.init()
	return clone(s.fw.bios)
}

// waitUpdates waits for update downloads to end (they end with the
// service's context).
func (s *rfService) waitUpdates() { s.fw.wg.Wait() }
