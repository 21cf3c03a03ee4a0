package vmlab

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// machineHardware is what a Redfish BMC drives: a QEMU in the lab
// (qemuHardware), or a fake in unit tests.
type machineHardware interface {
	// start powers the machine on, booting first from target (a
	// Redfish BootSourceOverrideTarget: Cd, Pxe, Hdd; None for the
	// machine's own order) with medium (a file, or "" for an empty
	// drive) in its CD drive.
	start(target, medium string) error
	// stop powers it off: graceful asks the guest first (ACPI) and stops
	// it after a bound.
	stop(graceful bool) error
	// running reports whether it is on.
	running() bool
	// changeMedium puts medium ("" ejects) into the running machine's CD
	// drive.
	changeMedium(medium string) error
}

// Redfish resource paths of the lab's BMC.
const (
	rfRoot      = "/redfish/v1"
	rfSystems   = rfRoot + "/Systems"
	rfManagers  = rfRoot + "/Managers"
	rfManager   = rfManagers + "/bmc"
	rfMediaColl = rfManager + "/VirtualMedia"
	rfCd        = rfMediaColl + "/Cd"
)

// Limits of the lab's Redfish BMC.
const (
	rfMaxBody            = 64 << 10
	rfDefaultMaxMedia    = 1 << 30
	rfDefaultMediaFetch  = 5 * time.Minute
	rfGracefulBound      = 30 * time.Second
	rfMediaRedirectLimit = 3
)

var (
	rfResetTypes   = []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle"}
	rfBootTargets  = []string{"None", "Pxe", "Cd", "Hdd"}
	rfBootEnabled  = []string{"Disabled", "Once", "Continuous"}
	rfBootModes    = []string{"Legacy"}
	rfBootWritable = []string{"BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode"}
)

// rfService is the Redfish service of a lab machine's BMC: one
// ComputerSystem whose power and boot override drive a machineHardware,
// and one Manager with a CD virtual media device whose image it
// downloads (bounded in size and time) into a local file.
type rfService struct {
	hw                 machineHardware
	username, password string
	systemID, uuid     string
	name               string
	mediaDir           string
	maxMedia           int64
	fetchTimeout       time.Duration
	client             *http.Client
	log                *slog.Logger
	ctx                context.Context // ends at Close: downloads stop

	mu        sync.Mutex
	target    string // BootSourceOverrideTarget
	enabled   string // BootSourceOverrideEnabled
	image     string // the inserted image's URL
	medium    string // its local file
	inserted  bool
	wp        bool
	inserting bool
	seq       int
	starts    []time.Time
	events    []string
	fw        rfFirmware // firmware inventory, BIOS and tasks (redfishfirmware.go)
	fanFailed bool       // a fan reports Critical: the system's HealthRollup too
	mac       string
	memoryMB  int
	cpus      int
}

func newRFService(ctx context.Context, hw machineHardware, o rfServiceOptions) *rfService {
	s := &rfService{hw: hw, username: o.Username, password: o.Password, systemID: o.SystemID, uuid: o.UUID, name: o.Name,
		mediaDir: o.MediaDir, maxMedia: o.MaxMediaSize, fetchTimeout: o.MediaFetchTimeout, log: o.Logger, ctx: ctx,
		target: "None", enabled: "Disabled", mac: o.MAC, memoryMB: o.MemoryMB, cpus: o.CPUs}
	if s.maxMedia <= 0 {
		s.maxMedia = rfDefaultMaxMedia
	}
	if s.fetchTimeout <= 0 {
		s.fetchTimeout = rfDefaultMediaFetch
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.client = &http.Client{
		Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 30 * time.Second, TLSHandshakeTimeout: 10 * time.Second},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= rfMediaRedirectLimit {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	return s
}

type rfServiceOptions struct {
	Name, SystemID, UUID string
	Username, Password   string
	MediaDir             string
	MaxMediaSize         int64
	MediaFetchTimeout    time.Duration
	Logger               *slog.Logger
	// The machine's NIC, memory and processors, for out-of-band
	// inspection.
	MAC            string
	MemoryMB, CPUs int
}

func (s *rfService) event(format string, args ...any) {
	s.events = append(s.events, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// rfError writes a Redfish error body.
func rfError(w http.ResponseWriter, code int, id, msg string) {
	writeRF(w, code, map[string]any{"error": map[string]any{
		"code": "Base.1.8.GeneralError", "message": msg,
		"@Message.ExtendedInfo": []map[string]any{{
			"@odata.type": "#Message.v1_1_1.Message", "MessageId": "Base.1.8." + id, "Message": msg, "Severity": "Warning",
		}},
	}})
}

func writeRF(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func odata(p string) map[string]any { return map[string]any{"@odata.id": p} }

func (s *rfService) authorized(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	uok := subtle.ConstantTimeCompare([]byte(u), []byte(s.username)) == 1
	pok := subtle.ConstantTimeCompare([]byte(p), []byte(s.password)) == 1
	return uok && pok
}

func (s *rfService) systemPath() string { return rfSystems + "/" + s.systemID }

// ServeHTTP serves the Redfish resources. Everything but the service
// root and the version document needs HTTP Basic credentials.
func (s *rfService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && (p == "/redfish" || p == rfRoot) {
		if p == "/redfish" {
			writeRF(w, http.StatusOK, map[string]any{"v1": rfRoot + "/"})
			return
		}
		s.get(w, p)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="anvil vmlab BMC"`)
		rfError(w, http.StatusUnauthorized, "InsufficientPrivilege", "authentication required")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, p)
	case http.MethodPatch:
		if p == s.systemPath()+"/Bios/Settings" {
			if body, ok := readRFBody(w, r); ok {
				s.patchBIOSSettings(w, r, body)
			}
			return
		}
		if p != s.systemPath() {
			s.refuse(w, r.Method, p, "no resource at ")
			return
		}
		body, ok := readRFBody(w, r)
		if ok {
			s.patchSystem(w, body)
		}
	case http.MethodPost:
		var do func(http.ResponseWriter, map[string]any)
		switch p {
		case s.systemPath() + "/Actions/ComputerSystem.Reset":
			do = s.reset
		case rfCd + "/Actions/VirtualMedia.InsertMedia":
			do = s.insertMedia
		case rfCd + "/Actions/VirtualMedia.EjectMedia":
			do = s.ejectMedia
		case rfSimpleUpd:
			do = s.simpleUpdate
		case s.systemPath() + "/Bios/Actions/Bios.ResetBios":
			do = s.resetBIOS
		default:
			s.refuse(w, r.Method, p, "no action at ")
			return
		}
		body, ok := readRFBody(w, r)
		if ok {
			do(w, body)
		}
	default:
		rfError(w, http.StatusMethodNotAllowed, "OperationNotAllowed", r.Method+" is not allowed")
	}
}

// readRFBody reads a JSON object body of at most rfMaxBody bytes.
// refuse answers a method the resource at p does not take (405), or a
// path with nothing there (404, missing naming what was looked for).
func (s *rfService) refuse(w http.ResponseWriter, method, p, missing string) {
	if s.resource(p) != nil {
		rfError(w, http.StatusMethodNotAllowed, "OperationNotAllowed", method+" is not allowed on "+p)
		return
	}
	rfError(w, http.StatusNotFound, "ResourceMissingAtURI", missing+p)
}

func readRFBody(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, rfMaxBody+1))
	if err != nil {
		rfError(w, http.StatusBadRequest, "MalformedJSON", "reading the body: "+err.Error())
		return nil, false
	}
	if len(b) > rfMaxBody {
		rfError(w, http.StatusRequestEntityTooLarge, "GeneralError", fmt.Sprintf("body larger than %d bytes", rfMaxBody))
		return nil, false
	}
	var body map[string]any
	if len(strings.TrimSpace(string(b))) == 0 {
		return map[string]any{}, true
	}
	if err := json.Unmarshal(b, &body); err != nil || body == nil {
		rfError(w, http.StatusBadRequest, "MalformedJSON", "the body is not a JSON object")
		return nil, false
	}
	return body, true
}

func (s *rfService) get(w http.ResponseWriter, p string) {
	if p == s.systemPath()+"/Bios/Settings" {
		s.mu.Lock()
		w.Header().Set("ETag", s.settingsETag())
		s.mu.Unlock()
	}
	if res := s.resource(p); res != nil {
		writeRF(w, http.StatusOK, res)
		return
	}
	rfError(w, http.StatusNotFound, "ResourceMissingAtURI", "no resource at "+p)
}

// resource renders the resource at p, or nil.
func (s *rfService) resource(p string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch p {
	case rfRoot:
		return map[string]any{
			"@odata.id": rfRoot, "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Id": "RootService",
			"Name": "Anvil vmlab BMC", "RedfishVersion": "1.6.0", "UUID": s.uuid,
			"Systems": odata(rfSystems), "Managers": odata(rfManagers),
			"UpdateService": odata(rfUpdate), "TaskService": odata(rfTaskService), "Registries": odata(rfRegistries),
		}
	case rfSystems:
		return map[string]any{
			"@odata.id": rfSystems, "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection", "Name": "Computer System Collection",
			"Members": []any{odata(s.systemPath())}, "Members@odata.count": 1,
		}
	case s.systemPath():
		power := "Off"
		if s.hw.running() {
			power = "On"
		}
		return map[string]any{
			"@odata.id": p, "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem", "Id": s.systemID, "Name": s.name,
			"UUID": s.uuid, "PowerState": power, "SystemType": "Virtual",
			"Status": map[string]any{"State": "Enabled", "Health": "OK", "HealthRollup": s.rollup()},
			"Boot": map[string]any{
				"BootSourceOverrideTarget": s.target, "BootSourceOverrideTarget@Redfish.AllowableValues": rfBootTargets,
				"BootSourceOverrideEnabled": s.enabled, "BootSourceOverrideEnabled@Redfish.AllowableValues": rfBootEnabled,
				"BootSourceOverrideMode": "Legacy", "BootSourceOverrideMode@Redfish.AllowableValues": rfBootModes,
			},
			"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
				"target": p + "/Actions/ComputerSystem.Reset", "ResetType@Redfish.AllowableValues": rfResetTypes,
			}},
			"Links": map[string]any{"ManagedBy": []any{odata(rfManager)}},
			"Bios":  odata(p + "/Bios"),
			// What out-of-band inspection reads.
			"MemorySummary":    map[string]any{"TotalSystemMemoryGiB": float64(s.memoryMB) / 1024},
			"ProcessorSummary": map[string]any{"Count": 1, "LogicalProcessorCount": s.cpus},
			"Processors":       odata(p + "/Processors"), "EthernetInterfaces": odata(p + "/EthernetInterfaces"),
		}
	case s.systemPath() + "/Processors":
		return map[string]any{"@odata.id": p, "@odata.type": "#ProcessorCollection.ProcessorCollection", "Name": "Processors",
			"Members": []any{odata(p + "/CPU0")}, "Members@odata.count": 1}
	case s.systemPath() + "/Processors/CPU0":
		return map[string]any{"@odata.id": p, "@odata.type": "#Processor.v1_3_0.Processor", "Id": "CPU0", "Name": "Processor",
			"ProcessorType": "CPU", "ProcessorArchitecture": "x86", "InstructionSet": "x86-64", "Model": "QEMU TCG",
			"TotalCores": s.cpus, "TotalThreads": s.cpus, "Status": map[string]any{"State": "Enabled", "Health": "OK"}}
	case s.systemPath() + "/EthernetInterfaces":
		return map[string]any{"@odata.id": p, "@odata.type": "#EthernetInterfaceCollection.EthernetInterfaceCollection", "Name": "NICs",
			"Members": []any{odata(p + "/NIC0")}, "Members@odata.count": 1}
	case s.systemPath() + "/EthernetInterfaces/NIC0":
		return map[string]any{"@odata.id": p, "@odata.type": "#EthernetInterface.v1_4_0.EthernetInterface", "Id": "NIC0", "Name": "NIC",
			"MACAddress": s.mac, "PermanentMACAddress": s.mac, "Status": map[string]any{"State": "Enabled", "Health": "OK"}}
	case rfManagers:
		return map[string]any{
			"@odata.id": rfManagers, "@odata.type": "#ManagerCollection.ManagerCollection", "Name": "Manager Collection",
			"Members": []any{odata(rfManager)}, "Members@odata.count": 1,
		}
	case rfManager:
		return map[string]any{
			"@odata.id": rfManager, "@odata.type": "#Manager.v1_5_0.Manager", "Id": "bmc", "Name": "Anvil vmlab BMC",
			"ManagerType": "BMC", "Status": map[string]any{"State": "Enabled", "Health": "OK"},
			"VirtualMedia": odata(rfMediaColl),
			"Links":        map[string]any{"ManagerForServers": []any{odata(s.systemPath())}},
		}
	case rfMediaColl:
		return map[string]any{
			"@odata.id": rfMediaColl, "@odata.type": "#VirtualMediaCollection.VirtualMediaCollection", "Name": "Virtual Media Services",
			"Members": []any{odata(rfCd)}, "Members@odata.count": 1,
		}
	case rfCd:
		via, name := "NotConnected", ""
		if s.inserted {
			via = "URI"
			if u, err := url.Parse(s.image); err == nil {
				name = filepath.Base(u.Path)
			}
		}
		return map[string]any{
			"@odata.id": rfCd, "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia", "Id": "Cd", "Name": "Virtual CD",
			"MediaTypes": []string{"CD", "DVD"}, "Image": s.image, "ImageName": name, "Inserted": s.inserted,
			"WriteProtected": s.wp, "ConnectedVia": via,
			"Actions": map[string]any{
				"#VirtualMedia.InsertMedia": map[string]any{"target": rfCd + "/Actions/VirtualMedia.InsertMedia"},
				"#VirtualMedia.EjectMedia":  map[string]any{"target": rfCd + "/Actions/VirtualMedia.EjectMedia"},
			},
		}
	}
	return s.firmwareResource(p)
}

// patchSystem changes the boot override; anything else is refused.
func (s *rfService) patchSystem(w http.ResponseWriter, body map[string]any) {
	if len(body) == 0 {
		rfError(w, http.StatusBadRequest, "PropertyMissing", "nothing to change")
		return
	}
	for k := range body {
		if k != "Boot" {
			rfError(w, http.StatusBadRequest, "PropertyNotWritable", "the property "+k+" is not writable")
			return
		}
	}
	boot, ok := body["Boot"].(map[string]any)
	if !ok || len(boot) == 0 {
		rfError(w, http.StatusBadRequest, "PropertyValueTypeError", "Boot must be an object with properties to change")
		return
	}
	vals := map[string]string{}
	for k, v := range boot {
		if !slices.Contains(rfBootWritable, k) {
			rfError(w, http.StatusBadRequest, "PropertyNotWritable", "the property Boot/"+k+" is not writable")
			return
		}
		str, ok := v.(string)
		if !ok {
			rfError(w, http.StatusBadRequest, "PropertyValueTypeError", fmt.Sprintf("Boot/%s: %v is not a string", k, v))
			return
		}
		allowed := map[string][]string{"BootSourceOverrideTarget": rfBootTargets, "BootSourceOverrideEnabled": rfBootEnabled,
			"BootSourceOverrideMode": rfBootModes}[k]
		if !slices.Contains(allowed, str) {
			rfError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("Boot/%s: %q is not one of %v", k, str, allowed))
			return
		}
		vals[k] = str
	}
	s.mu.Lock()
	if v, ok := vals["BootSourceOverrideTarget"]; ok {
		s.target = v
	}
	if v, ok := vals["BootSourceOverrideEnabled"]; ok {
		s.enabled = v
	}
	if s.target == "None" && s.enabled != "Disabled" {
		s.enabled = "Disabled"
	}
	s.event("boot %s %s", s.target, s.enabled)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// powerOn starts the machine with the boot override (a Once override
// is spent). Called with s.mu held.
func (s *rfService) powerOn() error {
	target := "None"
	if s.enabled != "Disabled" {
		target = s.target
	}
	medium := ""
	if s.inserted {
		medium = s.medium
	}
	if err := s.hw.start(target, medium); err != nil {
		return err
	}
	// The machine boots: what the BMC staged takes effect.
	s.applyPendingLocked()
	s.starts = append(s.starts, time.Now())
	if s.enabled == "Once" {
		s.enabled, s.target = "Disabled", "None"
	}
	return nil
}

// reset carries out ComputerSystem.Reset.
func (s *rfService) reset(w http.ResponseWriter, body map[string]any) {
	for k := range body {
		if k != "ResetType" {
			rfError(w, http.StatusBadRequest, "ActionParameterUnknown", "unknown parameter "+k+" of ComputerSystem.Reset")
			return
		}
	}
	rt, ok := body["ResetType"].(string)
	if !ok {
		rfError(w, http.StatusBadRequest, "ActionParameterMissing", "ComputerSystem.Reset needs the parameter ResetType (a string)")
		return
	}
	if !slices.Contains(rfResetTypes, rt) {
		rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", fmt.Sprintf("ResetType %q is not one of %v", rt, rfResetTypes))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.event("reset %s", rt)
	var err error
	switch rt {
	case "On", "ForceOn":
		if !s.hw.running() {
			err = s.powerOn()
		}
	case "ForceOff", "GracefulShutdown":
		if s.hw.running() {
			err = s.hw.stop(rt == "GracefulShutdown")
		}
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		if s.hw.running() {
			err = s.hw.stop(rt == "GracefulRestart")
		}
		if err == nil {
			err = s.powerOn()
		}
	}
	if err != nil {
		s.log.Warn("vmlab: BMC reset failed", "machine", s.name, "reset", rt, "err", err)
		rfError(w, http.StatusInternalServerError, "InternalError", "ComputerSystem.Reset "+rt+": "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// insertMedia downloads the image into a local file and puts it in the
// CD drive (the running machine's, through QMP; the next start's).
func (s *rfService) insertMedia(w http.ResponseWriter, body map[string]any) {
	known := []string{"Image", "Inserted", "WriteProtected", "TransferMethod", "TransferProtocolType", "UserName", "Password"}
	for k := range body {
		if !slices.Contains(known, k) {
			rfError(w, http.StatusBadRequest, "ActionParameterUnknown", "unknown parameter "+k+" of VirtualMedia.InsertMedia")
			return
		}
	}
	image, ok := body["Image"].(string)
	if !ok || image == "" {
		rfError(w, http.StatusBadRequest, "ActionParameterMissing", "VirtualMedia.InsertMedia needs the parameter Image (a URL)")
		return
	}
	u, err := url.Parse(image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		rfError(w, http.StatusBadRequest, "ActionParameterValueFormatError", "Image must be an http(s) URL without credentials")
		return
	}
	wp := true
	for _, k := range []string{"Inserted", "WriteProtected"} {
		v, present := body[k]
		if !present {
			continue
		}
		b, ok := v.(bool)
		if !ok {
			rfError(w, http.StatusBadRequest, "ActionParameterValueTypeError", k+" must be a boolean")
			return
		}
		if k == "Inserted" && !b {
			rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", "Inserted false is not supported: the image is inserted")
			return
		}
		if k == "WriteProtected" {
			if !b {
				rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", "WriteProtected false is not supported: a CD is read-only")
				return
			}
			wp = b
		}
	}
	if tp, ok := body["TransferProtocolType"]; ok && tp != "HTTP" && tp != "HTTPS" {
		rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", "TransferProtocolType must be HTTP or HTTPS")
		return
	}
	if tm, ok := body["TransferMethod"]; ok && tm != "Stream" && tm != "Upload" {
		rfError(w, http.StatusBadRequest, "ActionParameterValueNotInList", "TransferMethod must be Stream or Upload")
		return
	}
	s.mu.Lock()
	if s.inserted || s.inserting {
		s.mu.Unlock()
		rfError(w, http.StatusConflict, "ResourceInUse", "the virtual CD already holds an image: eject it first")
		return
	}
	s.inserting = true
	s.seq++
	file := filepath.Join(s.mediaDir, fmt.Sprintf("cd-%d.iso", s.seq))
	s.mu.Unlock()
	done := false
	defer func() {
		s.mu.Lock()
		s.inserting = false
		s.mu.Unlock()
		if !done {
			os.Remove(file)
		}
	}()
	began := time.Now()
	size, err := s.download(image, file)
	if err != nil {
		s.mu.Lock()
		s.event("insert failed: %v", err)
		s.mu.Unlock()
		rfError(w, http.StatusBadRequest, "ActionParameterValueError", "Image could not be fetched: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hw.running() {
		if err := s.hw.changeMedium(file); err != nil {
			rfError(w, http.StatusInternalServerError, "InternalError", "changing the medium: "+err.Error())
			return
		}
	}
	s.image, s.medium, s.inserted, s.wp = image, file, true, wp
	done = true
	s.event("insert %s (%d bytes in %.1fs)", image, size, time.Since(began).Seconds())
	w.WriteHeader(http.StatusNoContent)
}

// download fetches image into file, bounded by maxMedia bytes and
// fetchTimeout.
func (s *rfService) download(image, file string) (int64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET: %s", resp.Status)
	}
	if resp.ContentLength > s.maxMedia {
		return 0, fmt.Errorf("the image is %d bytes, more than %d", resp.ContentLength, s.maxMedia)
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, s.maxMedia+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if n > s.maxMedia {
		return n, fmt.Errorf("the image is more than %d bytes", s.maxMedia)
	}
	return n, nil
}

// ejectMedia empties the CD drive; an empty drive stays empty.
func (s *rfService) ejectMedia(w http.ResponseWriter, body map[string]any) {
	if len(body) > 0 {
		rfError(w, http.StatusBadRequest, "ActionParameterUnknown", "VirtualMedia.EjectMedia takes no parameters")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inserted {
		if s.hw.running() {
			if err := s.hw.changeMedium(""); err != nil {
				rfError(w, http.StatusInternalServerError, "InternalError", "ejecting the medium: "+err.Error())
				return
			}
		}
		os.Remove(s.medium)
		s.event("eject %s", s.image)
	}
	s.image, s.medium, s.inserted = "", "", false
	w.WriteHeader(http.StatusNoContent)
}

// Starts and events, for RedfishMachine.
// rollup is the system's HealthRollup: Critical while a fan has failed.
// The caller holds s.mu.
func (s *rfService) rollup() string {
	if s.fanFailed {
		return "Critical"
	}
	return "OK"
}

// setFanFailed fails the machine's fan, or repairs it.
func (s *rfService) setFanFailed(failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fanFailed = failed
	s.event("fan failed: %v", failed)
}

func (s *rfService) startTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...)
}

func (s *rfService) eventList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}
