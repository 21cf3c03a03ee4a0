package redfishtest

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed testdata/mockup
var mockupFS embed.FS

// SystemID is the identifier of the one computer system the server
// exposes, as the DMTF mockup names it.
const SystemID = "437XR1138R2"

const (
	root        = "/redfish/v1"
	systemPath  = root + "/Systems/" + SystemID
	sessionsURI = root + "/SessionService/Sessions"
	biosRegID   = "BiosAttributeRegistryP89.v1_0_0"
)

// Options configures a Server. The zero value serves plain HTTP with the
// user "admin" and the password "password".
type Options struct {
	// Username and Password are the only credentials the service accepts,
	// through HTTP Basic or a session.
	Username string
	Password string
	// TLS serves HTTPS with a freshly generated self-signed certificate.
	TLS bool
	// IPv6 serves on [::1] instead of 127.0.0.1 (URL is then
	// http://[::1]:port).
	IPv6 bool
	// Latency is added to every request before it is answered, to model
	// a slow BMC.
	Latency time.Duration
	// NoSessions models a BMC without a session service, as sushy-tools'
	// emulator is: the service root names no SessionService and no
	// Links.Sessions, a session POST answers 401 without HTTP Basic
	// credentials and 404 with them, and only HTTP Basic works.
	NoSessions bool
	// Systems is how many ComputerSystems the service exposes behind its
	// one address (default 1), as sushy-tools serves many. The first is
	// SystemID; the others are copies of it named SystemID-2, SystemID-3,
	// ..., each with its own UUID, power state, boot override, virtual
	// media and BIOS.
	Systems int
	// FetchMedia makes InsertMedia download the image, as sushy-tools
	// does, and fail (400) when it cannot: only from loopback addresses,
	// up to 64 MiB, within 10 s. MediaContent returns what was fetched.
	FetchMedia bool
	// TaskPolls is how many GETs of a firmware update task report it
	// Running before it completes (default 2).
	TaskPolls int
}

// Stats is a snapshot of what the server has seen.
type Stats struct {
	// Requests counts every HTTP request answered.
	Requests int
	// PeakConcurrent is the largest number of requests in flight at once.
	PeakConcurrent int
	// SessionsCreated and SessionsDeleted count logins and logouts.
	SessionsCreated int
	SessionsDeleted int
	// Unauthorized counts requests answered 401.
	Unauthorized int
	// Resets lists the ResetType of every accepted Reset action in order.
	Resets []string
	// Boots lists the boot source of every simulated boot (a Reset that
	// leaves the system on), honouring the boot override.
	Boots []string
	// SystemResets, SystemBoots and SystemBootPatches hold the same per
	// system id (SystemBootPatches lists the BootSourceOverrideTarget of
	// every accepted boot override PATCH), so that a test with several
	// systems can tell which system an action reached.
	SystemResets      map[string][]string
	SystemBoots       map[string][]string
	SystemBootPatches map[string][]string
}

// Server is a stateful Redfish service built from the DMTF public
// mockups. It is safe for concurrent use. Close releases its listener.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu        sync.Mutex
	res       map[string]map[string]any
	sessions  map[string]string // token -> session URI
	nextID    int
	failNext  []int
	inflight  int
	stats     Stats
	taskPolls map[string]int
	systems   []string             // system paths, in collection order
	sysState  map[string]*sysState // by system path
	tasks     map[string]updateTask
	media     map[string][]byte // virtual media URI -> fetched image (FetchMedia)
	fwPending map[string]string // inventory URI -> version staged until the next reset
}

// sysState is the per-system state that is not a resource.
type sysState struct {
	biosPend  map[string]any
	biosReset bool
	biosDef   map[string]any
}

// updateTask is a SimpleUpdate in progress: the inventory members it
// updates and the image.
type updateTask struct {
	targets []string
	image   string
}

// biosInventory is the firmware inventory member of the systems' BIOS:
// an update of it is staged and takes effect at the next system reset,
// as a real BMC's does; other components (the BMC's own) take effect
// when the task completes.
const biosInventory = root + "/UpdateService/FirmwareInventory/BIOS"

// New loads the mockup, makes it stateful and starts serving it on a
// loopback port. The caller must Close the server.
func New(opts Options) (*Server, error) {
	if opts.Username == "" {
		opts.Username = "admin"
	}
	if opts.Password == "" {
		opts.Password = "password"
	}
	if opts.TaskPolls <= 0 {
		opts.TaskPolls = 2
	}
	if opts.Systems <= 0 {
		opts.Systems = 1
	}
	s := &Server{
		opts:      opts,
		res:       map[string]map[string]any{},
		sessions:  map[string]string{},
		nextID:    100,
		taskPolls: map[string]int{},
		sysState:  map[string]*sysState{},
		media:     map[string][]byte{},
		tasks:     map[string]updateTask{},
		fwPending: map[string]string{},
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Refused handshakes (clients verifying the self-signed certificate)
	// are expected in tests; keep them out of the test output.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if opts.IPv6 {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			return nil, fmt.Errorf("redfishtest: listen on [::1]: %w", err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	if opts.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	return s, nil
}

// URL is the base address of the service, such as http://127.0.0.1:1234.
func (s *Server) URL() string { return s.srv.URL }

// Address is the URL without the scheme's default expectations: the value
// to put in redfish_address.
func (s *Server) Address() string { return s.srv.URL }

// CertPool returns a pool trusting the server's self-signed certificate,
// or nil for plain HTTP.
func (s *Server) CertPool() *x509.CertPool {
	if s.srv.TLS == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(s.srv.Certificate())
	return p
}

// Certificate returns the server's self-signed certificate, or nil for
// plain HTTP.
func (s *Server) Certificate() *x509.Certificate {
	if s.srv.TLS == nil {
		return nil
	}
	return s.srv.Certificate()
}

// TLSConfig is the server's TLS configuration, or nil for plain HTTP.
func (s *Server) TLSConfig() *tls.Config { return s.srv.TLS }

// Close stops the server and waits for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Resets = append([]string(nil), s.stats.Resets...)
	st.Boots = append([]string(nil), s.stats.Boots...)
	st.SystemResets, st.SystemBoots, st.SystemBootPatches = map[string][]string{}, map[string][]string{}, map[string][]string{}
	for k, v := range s.stats.SystemResets {
		st.SystemResets[k] = append([]string(nil), v...)
	}
	for k, v := range s.stats.SystemBoots {
		st.SystemBoots[k] = append([]string(nil), v...)
	}
	for k, v := range s.stats.SystemBootPatches {
		st.SystemBootPatches[k] = append([]string(nil), v...)
	}
	return st
}

// ActiveSessions returns how many sessions are currently open.
func (s *Server) ActiveSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// ExpireSessions forgets every session, as a BMC does after its session
// timeout or a reboot: the next request with an old token gets 401.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, uri := range s.sessions {
		s.removeMember(sessionsURI, uri)
		delete(s.res, uri)
	}
	s.sessions = map[string]string{}
}

// FailNext makes the next len(codes) requests (after authentication)
// answer with the given HTTP status codes, in order.
func (s *Server) FailNext(codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = append(s.failNext, codes...)
}

// PowerState returns the first system's PowerState ("On" or "Off").
func (s *Server) PowerState() string { return s.SystemPowerState(SystemID) }

// SetPowerState changes the first system's PowerState out of band.
func (s *Server) SetPowerState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res[systemPath]["PowerState"] = state
}

// SystemIDs returns the ids of the systems the service exposes, in
// collection order.
func (s *Server) SystemIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.systems))
	for _, p := range s.systems {
		out = append(out, path.Base(p))
	}
	return out
}

// SystemPath returns the resource path of system id.
func SystemPath(id string) string { return root + "/Systems/" + id }

// SystemPowerState returns the PowerState of system id, or "" when there
// is no such system.
func (s *Server) SystemPowerState(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, _ := s.res[SystemPath(id)]["PowerState"].(string)
	return v
}

// SetSystemUUID changes the UUID system id reports, as when another
// machine answers at the BMC's address (a re-cabled port, a reused BMC
// address). It reports whether the system exists.
func (s *Server) SetSystemUUID(id, uuid string) bool {
	return s.Mutate(SystemPath(id), func(m map[string]any) { m["UUID"] = uuid })
}

// Resource returns a deep copy of the resource at uri, or nil.
func (s *Server) Resource(uri string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.res[strings.TrimSuffix(uri, "/")]
	if !ok {
		return nil
	}
	return deepCopy(r)
}

// Mutate lets a test change the resource at uri in place, for example to
// model a vendor quirk. It reports whether the resource exists.
func (s *Server) Mutate(uri string, fn func(map[string]any)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.res[strings.TrimSuffix(uri, "/")]
	if ok {
		fn(r)
	}
	return ok
}

func deepCopy(r map[string]any) map[string]any {
	b, _ := json.Marshal(r)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// load reads the embedded mockup tree: <dir>/index.json is the resource
// at /redfish/v1/<dir>.
func (s *Server) load() error {
	const base = "testdata/mockup"
	err := fs.WalkDir(mockupFS, base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Base(p) != "index.json" {
			return err
		}
		b, err := mockupFS.ReadFile(p)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("redfishtest: mockup %s: %w", p, err)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(path.Dir(p), base), "/")
		s.res[root+rel] = m
		return nil
	})
	if err != nil {
		return fmt.Errorf("redfishtest: load mockup: %w", err)
	}
	s.decorate()
	return nil
}

// decorate adds what the static mockup lacks for a stateful service:
// actions on virtual media, a Storage link, a BIOS attribute registry,
// and collections that only list resources that exist.
func (s *Server) decorate() {
	sys := s.res[systemPath]
	sys["Storage"] = map[string]any{"@odata.id": systemPath + "/Storage"}
	sys["PowerState"] = "Off"
	s.res[systemPath+"/Bios"]["ResetBiosToDefaultsPending"] = false
	if s.opts.NoSessions {
		delete(s.res[root], "SessionService")
		delete(s.res[root], "Links")
	}
	for uri, r := range s.res {
		if strings.HasPrefix(uri, systemPath+"/VirtualMedia/") {
			r["Actions"] = map[string]any{
				"#VirtualMedia.InsertMedia": map[string]any{"target": uri + "/Actions/VirtualMedia.InsertMedia"},
				"#VirtualMedia.EjectMedia":  map[string]any{"target": uri + "/Actions/VirtualMedia.EjectMedia"},
			}
			r["Inserted"] = false
			r["Image"] = nil
			r["ImageName"] = nil
		}
	}
	// A BIOS attribute registry written for these tests (the mockup names
	// one but does not ship it).
	regURI := root + "/Registries/" + biosRegID
	s.res[root+"/Registries"] = map[string]any{
		"@odata.id": root + "/Registries", "Name": "Registries",
		"Members": []any{map[string]any{"@odata.id": regURI}},
	}
	s.res[regURI] = map[string]any{
		"@odata.id": regURI, "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
		"Id": biosRegID, "Registry": biosRegID, "Languages": []any{"en"},
		"Location": []any{map[string]any{"Language": "en", "Uri": regURI + "/Registry"}},
	}
	s.res[regURI+"/Registry"] = biosRegistry(regURI + "/Registry")
	for _, coll := range []string{sessionsURI, root + "/TaskService/Tasks"} {
		if s.res[coll] == nil {
			s.res[coll] = map[string]any{"@odata.id": coll, "Name": path.Base(coll), "Members": []any{}}
		}
	}
	s.cloneSystems()
	if s.opts.NoSessions {
		// No session service at all: its resources answer 404.
		for uri := range s.res {
			if uri == root+"/SessionService" || strings.HasPrefix(uri, root+"/SessionService/") {
				delete(s.res, uri)
			}
		}
	}
	// Collections list only what exists.
	for _, r := range s.res {
		members, ok := r["Members"].([]any)
		if !ok {
			continue
		}
		kept := members[:0]
		for _, m := range members {
			if id, _ := m.(map[string]any)["@odata.id"].(string); s.res[strings.SplitN(id, "#", 2)[0]] != nil {
				kept = append(kept, m)
			}
		}
		r["Members"] = kept
		r["Members@odata.count"] = len(kept)
	}
}

// cloneSystems adds Options.Systems-1 copies of the mockup's system, each
// with its own id, UUID and sub-resources, to the Systems collection.
func (s *Server) cloneSystems() {
	var sub []string
	for uri := range s.res {
		if uri == systemPath || strings.HasPrefix(uri, systemPath+"/") {
			sub = append(sub, uri)
		}
	}
	sort.Strings(sub)
	s.systems = []string{systemPath}
	for i := 2; i <= s.opts.Systems; i++ {
		id := SystemID + "-" + strconv.Itoa(i)
		p := SystemPath(id)
		for _, uri := range sub {
			b, _ := json.Marshal(s.res[uri])
			b = []byte(strings.ReplaceAll(string(b), systemPath, p))
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			s.res[p+strings.TrimPrefix(uri, systemPath)] = m
		}
		s.res[p]["Id"] = id
		s.res[p]["UUID"] = fmt.Sprintf("38947555-7742-3448-3784-%012d", i)
		s.res[p]["Name"] = "System " + id
		s.addMember(root+"/Systems", p)
		s.systems = append(s.systems, p)
	}
	for _, p := range s.systems {
		s.sysState[p] = &sysState{biosDef: deepCopy(s.res[p+"/Bios"]["Attributes"].(map[string]any))}
	}
}

// systemOf returns the path of the system uri belongs to, or "".
func (s *Server) systemOf(uri string) string {
	for _, p := range s.systems {
		if uri == p || strings.HasPrefix(uri, p+"/") {
			return p
		}
	}
	return ""
}

func biosRegistry(uri string) map[string]any {
	enum := func(vals ...string) []any {
		out := make([]any, 0, len(vals))
		for _, v := range vals {
			out = append(out, map[string]any{"ValueName": v})
		}
		return out
	}
	readOnly := func(a map[string]any) map[string]any { a["ReadOnly"] = true; return a }
	attr := func(name, typ string, vals []any) map[string]any {
		a := map[string]any{"AttributeName": name, "Type": typ, "ReadOnly": false, "ResetRequired": true}
		if vals != nil {
			a["Value"] = vals
		}
		return a
	}
	return map[string]any{
		"@odata.id": uri, "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry",
		"Id": biosRegID, "Name": "BIOS attribute registry", "Language": "en",
		"RegistryVersion": "1.0.0", "OwningEntity": "Anvil tests",
		"RegistryEntries": map[string]any{"Attributes": []any{
			attr("BootMode", "Enumeration", enum("Uefi", "Bios")),
			attr("ProcTurboMode", "Enumeration", enum("Enabled", "Disabled")),
			attr("ProcHyperthreading", "Enumeration", enum("Enabled", "Disabled")),
			attr("PowerProfile", "Enumeration", enum("MaxPerf", "Balanced", "PowerSaver")),
			attr("ProcCoreDisable", "Integer", nil),
			attr("AdminPhone", "String", nil),
			readOnly(attr("EmbeddedSata", "Enumeration", enum("Raid", "Ahci"))),
		}},
	}
}

func (s *Server) newID() string {
	s.nextID++
	return strconv.Itoa(s.nextID)
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.inflight++
	s.stats.Requests++
	if s.inflight > s.stats.PeakConcurrent {
		s.stats.PeakConcurrent = s.inflight
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	if s.opts.Latency > 0 {
		select {
		case <-time.After(s.opts.Latency):
		case <-r.Context().Done():
			return
		}
	}
	uri := strings.TrimSuffix(r.URL.Path, "/")
	var body map[string]any
	if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPatch) {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeError(w, http.StatusBadRequest, "Base.1.5.0.MalformedJSON", "request body is not JSON: "+err.Error())
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	public := uri == root || uri == root+"/odata" || (uri == sessionsURI && r.Method == http.MethodPost && !s.opts.NoSessions)
	if !public && !s.authorized(r) {
		s.stats.Unauthorized++
		w.Header().Set("WWW-Authenticate", `Basic realm="redfishtest"`)
		writeError(w, http.StatusUnauthorized, "Base.1.5.0.NoValidSession", "no valid session or credentials")
		return
	}
	if len(s.failNext) > 0 && !public {
		code := s.failNext[0]
		s.failNext = s.failNext[1:]
		writeError(w, code, "Base.1.5.0.InternalError", "injected failure")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, uri)
	case http.MethodPost:
		s.post(w, uri, body)
	case http.MethodPatch:
		s.patch(w, uri, body)
	case http.MethodDelete:
		s.delete(w, uri)
	default:
		writeError(w, http.StatusMethodNotAllowed, "Base.1.5.0.OperationNotAllowed", r.Method+" not allowed")
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		_, ok := s.sessions[tok]
		return ok
	}
	u, p, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(u), []byte(s.opts.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(p), []byte(s.opts.Password)) == 1
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, id, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{
		"code": id, "message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}},
	}})
}

func (s *Server) get(w http.ResponseWriter, uri string) {
	r, ok := s.res[uri]
	if !ok {
		writeError(w, http.StatusNotFound, "Base.1.5.0.ResourceMissingAtURI", uri+" not found")
		return
	}
	if strings.HasPrefix(uri, root+"/TaskService/Tasks/") {
		s.advanceTask(uri, r)
	}
	writeJSON(w, http.StatusOK, r)
}

func (s *Server) addMember(coll, uri string) {
	c := s.res[coll]
	members, _ := c["Members"].([]any)
	members = append(members, map[string]any{"@odata.id": uri})
	c["Members"] = members
	c["Members@odata.count"] = len(members)
}

func (s *Server) removeMember(coll, uri string) {
	c := s.res[coll]
	members, _ := c["Members"].([]any)
	kept := make([]any, 0, len(members))
	for _, m := range members {
		if id, _ := m.(map[string]any)["@odata.id"].(string); id != uri {
			kept = append(kept, m)
		}
	}
	c["Members"] = kept
	c["Members@odata.count"] = len(kept)
}

func (s *Server) post(w http.ResponseWriter, uri string, body map[string]any) {
	sp := s.systemOf(uri)
	switch {
	case uri == sessionsURI && s.opts.NoSessions:
		writeError(w, http.StatusNotFound, "Base.1.5.0.ResourceMissingAtURI", uri+" not found")
	case uri == sessionsURI:
		s.login(w, body)
	case sp != "" && uri == sp+"/Actions/ComputerSystem.Reset":
		s.reset(w, sp, body)
	case sp != "" && strings.HasPrefix(uri, sp+"/VirtualMedia/") && strings.HasSuffix(uri, "/Actions/VirtualMedia.InsertMedia"):
		s.insertMedia(w, strings.TrimSuffix(uri, "/Actions/VirtualMedia.InsertMedia"), body)
	case sp != "" && strings.HasPrefix(uri, sp+"/VirtualMedia/") && strings.HasSuffix(uri, "/Actions/VirtualMedia.EjectMedia"):
		vm := s.res[strings.TrimSuffix(uri, "/Actions/VirtualMedia.EjectMedia")]
		if vm == nil {
			writeError(w, http.StatusNotFound, "Base.1.5.0.ResourceMissingAtURI", uri+" not found")
			return
		}
		vm["Inserted"], vm["Image"], vm["ImageName"] = false, nil, nil
		w.WriteHeader(http.StatusNoContent)
	case sp != "" && uri == sp+"/Bios/Actions/Bios.ResetBios":
		s.sysState[sp].biosReset = true
		s.res[sp+"/Bios"]["ResetBiosToDefaultsPending"] = true
		w.WriteHeader(http.StatusNoContent)
	case sp != "" && strings.HasPrefix(uri, sp+"/Storage/") && strings.HasSuffix(uri, "/Volumes"):
		s.createVolume(w, uri, body)
	case uri == root+"/UpdateService/Actions/UpdateService.SimpleUpdate":
		s.simpleUpdate(w, body)
	default:
		writeError(w, http.StatusNotFound, "Base.1.5.0.ActionNotSupported", "no action at "+uri)
	}
}

func (s *Server) login(w http.ResponseWriter, body map[string]any) {
	u, _ := body["UserName"].(string)
	p, _ := body["Password"].(string)
	if subtle.ConstantTimeCompare([]byte(u), []byte(s.opts.Username)) != 1 ||
		subtle.ConstantTimeCompare([]byte(p), []byte(s.opts.Password)) != 1 {
		s.stats.Unauthorized++
		writeError(w, http.StatusUnauthorized, "Base.1.5.0.NoValidSession", "invalid credentials")
		return
	}
	id := s.newID()
	uri := sessionsURI + "/" + id
	tok := token()
	s.sessions[tok] = uri
	s.res[uri] = map[string]any{
		"@odata.id": uri, "@odata.type": "#Session.v1_7_0.Session", "Id": id, "Name": "Session " + id, "UserName": u,
	}
	s.addMember(sessionsURI, uri)
	s.stats.SessionsCreated++
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", uri)
	writeJSON(w, http.StatusCreated, s.res[uri])
}

func (s *Server) reset(w http.ResponseWriter, sp string, body map[string]any) {
	rt, _ := body["ResetType"].(string)
	sys := s.res[sp]
	st := s.sysState[sp]
	allowed := sys["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)["ResetType@Redfish.AllowableValues"].([]any)
	found := false
	for _, a := range allowed {
		found = found || a == rt
	}
	if !found {
		writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueNotInList", "ResetType "+rt+" not allowed")
		return
	}
	s.stats.Resets = append(s.stats.Resets, rt)
	if s.stats.SystemResets == nil {
		s.stats.SystemResets = map[string][]string{}
	}
	s.stats.SystemResets[path.Base(sp)] = append(s.stats.SystemResets[path.Base(sp)], rt)
	switch rt {
	case "On", "ForceOn":
		sys["PowerState"] = "On"
	case "ForceOff", "GracefulShutdown":
		sys["PowerState"] = "Off"
		st.biosDef = deepCopy(s.res[sp+"/Bios"]["Attributes"].(map[string]any))
		s.res[sp+"/Bios"]["ResetBiosToDefaultsPending"] = false
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		sys["PowerState"] = "On"
	case "PushPowerButton":
		if sys["PowerState"] == "On" {
			sys["PowerState"] = "Off"
			st.biosDef = deepCopy(s.res[sp+"/Bios"]["Attributes"].(map[string]any))
			s.res[sp+"/Bios"]["ResetBiosToDefaultsPending"] = false
		} else {
			sys["PowerState"] = "On"
		}
	case "Nmi":
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if sys["PowerState"] == "On" {
		s.applyPendingBios(sp)
		s.consumeBootOnce(sp)
		for target, v := range s.fwPending {
			s.res[target]["Version"] = v
			delete(s.fwPending, target)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// applyPendingBios moves pending BIOS settings into the current ones, as
// a BMC does on the next boot.
func (s *Server) applyPendingBios(sp string) {
	st := s.sysState[sp]
	bios := s.res[sp+"/Bios"]
	attrs := bios["Attributes"].(map[string]any)
	if st.biosReset {
		for k, v := range st.biosDef {
			attrs[k] = v
		}
		st.biosReset = false
		bios["ResetBiosToDefaultsPending"] = false
	}
	for k, v := range st.biosPend {
		attrs[k] = v
	}
	st.biosPend = nil
	s.res[sp+"/Bios/Settings"]["Attributes"] = map[string]any{}
}

// consumeBootOnce clears a one-time boot override once the system boots.
func (s *Server) consumeBootOnce(sp string) {
	boot := s.res[sp]["Boot"].(map[string]any)
	target, _ := boot["BootSourceOverrideTarget"].(string)
	switch boot["BootSourceOverrideEnabled"] {
	case "Once":
		boot["BootSourceOverrideEnabled"] = "Disabled"
	case "Continuous":
	default:
		target = "Hdd"
	}
	s.stats.Boots = append(s.stats.Boots, target)
	if s.stats.SystemBoots == nil {
		s.stats.SystemBoots = map[string][]string{}
	}
	s.stats.SystemBoots[path.Base(sp)] = append(s.stats.SystemBoots[path.Base(sp)], target)
}

func (s *Server) insertMedia(w http.ResponseWriter, vmURI string, body map[string]any) {
	vm := s.res[vmURI]
	if vm == nil {
		writeError(w, http.StatusNotFound, "Base.1.5.0.ResourceMissingAtURI", vmURI+" not found")
		return
	}
	img, _ := body["Image"].(string)
	if img == "" {
		writeError(w, http.StatusBadRequest, "Base.1.5.0.PropertyMissing", "Image is required")
		return
	}
	if vm["Inserted"] == true {
		writeError(w, http.StatusConflict, "Base.1.5.0.ResourceInUse", "media already inserted")
		return
	}
	if s.opts.FetchMedia {
		b, err := fetchImage(img)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueFormatError", "cannot download "+img+": "+err.Error())
			return
		}
		s.media[vmURI] = b
	}
	vm["Image"], vm["ImageName"], vm["Inserted"] = img, path.Base(img), true
	if wp, ok := body["WriteProtected"].(bool); ok {
		vm["WriteProtected"] = wp
	}
	w.WriteHeader(http.StatusNoContent)
}

// fetchImage downloads a virtual media image from a loopback address.
func fetchImage(img string) ([]byte, error) {
	u, err := url.Parse(img)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("not an http(s) URL")
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("the test BMC fetches from loopback addresses only")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(img)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	const limit = 64 << 20
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("image larger than %d bytes", limit)
	}
	return b, nil
}

// MediaContent returns the image the virtual media device at uri fetched
// at its last InsertMedia (Options.FetchMedia), or nil.
func (s *Server) MediaContent(uri string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.media[uri]...)
}

func (s *Server) createVolume(w http.ResponseWriter, coll string, body map[string]any) {
	if s.res[coll] == nil {
		writeError(w, http.StatusNotFound, "Base.1.5.0.ResourceMissingAtURI", coll+" not found")
		return
	}
	capBytes, ok := body["CapacityBytes"].(float64)
	if !ok || capBytes <= 0 {
		writeError(w, http.StatusBadRequest, "Base.1.5.0.PropertyMissing", "CapacityBytes must be a positive number")
		return
	}
	raid, _ := body["RAIDType"].(string)
	if raid == "" {
		raid = "RAID0"
	}
	id := s.newID()
	uri := coll + "/" + id
	name, _ := body["Name"].(string)
	if name == "" {
		name = "Volume " + id
	}
	vol := map[string]any{
		"@odata.id": uri, "@odata.type": "#Volume.v1_10_2.Volume", "Id": id, "Name": name,
		"RAIDType": raid, "CapacityBytes": capBytes,
		"Status": map[string]any{"State": "Enabled", "Health": "OK"},
	}
	if links, ok := body["Links"].(map[string]any); ok {
		vol["Links"] = links
	}
	s.res[uri] = vol
	s.addMember(coll, uri)
	w.Header().Set("Location", uri)
	writeJSON(w, http.StatusCreated, vol)
}

// simpleUpdateParams are the parameters UpdateService.SimpleUpdate takes.
var simpleUpdateParams = []string{"ImageURI", "Targets", "TransferProtocol", "Username", "Password", "ForceUpdate", "@Redfish.OperationApplyTime"}

// simpleUpdate starts a firmware update task, refusing what a BMC
// refuses: an unknown parameter, an ImageURI that is not an http(s) URL,
// a transfer protocol other than HTTP(S), a target that is not an
// updateable member of the firmware inventory. With no Targets the BIOS
// is updated.
func (s *Server) simpleUpdate(w http.ResponseWriter, body map[string]any) {
	for k := range body {
		if !slices.Contains(simpleUpdateParams, k) {
			writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterUnknown", "SimpleUpdate has no parameter "+k)
			return
		}
	}
	img, _ := body["ImageURI"].(string)
	if img == "" {
		writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterMissing", "SimpleUpdate needs ImageURI")
		return
	}
	if u, err := url.Parse(img); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueFormatError", "ImageURI "+img+" is not an http(s) URL")
		return
	}
	if tp, ok := body["TransferProtocol"]; ok && tp != "HTTP" && tp != "HTTPS" {
		writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueNotInList", fmt.Sprintf("TransferProtocol %v is not HTTP or HTTPS", tp))
		return
	}
	targets := []string{biosInventory}
	if raw, present := body["Targets"]; present {
		list, ok := raw.([]any)
		if !ok {
			writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueTypeError", "Targets must be a list of URIs")
			return
		}
		if len(list) > 0 {
			targets = nil
		}
		for _, t := range list {
			ts, _ := t.(string)
			inv := s.res[ts]
			if !strings.HasPrefix(ts, root+"/UpdateService/FirmwareInventory/") || inv == nil {
				writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueNotInList", fmt.Sprintf("target %v is not in the firmware inventory", t))
				return
			}
			if up, _ := inv["Updateable"].(bool); !up {
				writeError(w, http.StatusBadRequest, "Base.1.5.0.ActionParameterValueNotInList", "target "+ts+" is not updateable")
				return
			}
			targets = append(targets, ts)
		}
	}
	id := s.newID()
	uri := root + "/TaskService/Tasks/" + id
	s.res[uri] = map[string]any{
		"@odata.id": uri, "@odata.type": "#Task.v1_7_0.Task", "Id": id, "Name": "Firmware update",
		"TaskState": "Running", "TaskStatus": "OK", "PercentComplete": 0, "Messages": []any{},
	}
	s.tasks[uri] = updateTask{targets: targets, image: img}
	s.addMember(root+"/TaskService/Tasks", uri)
	w.Header().Set("Location", uri)
	writeJSON(w, http.StatusAccepted, s.res[uri])
}

// advanceTask moves a firmware update task on at each GET: Running for
// TaskPolls polls, then the BMC downloads the image (from loopback only,
// bounded, as fetchImage). A download that fails ends the task in
// Exception with the Update registry's TransferFailed message. Otherwise
// it completes: a BIOS update is staged for the next system reset and
// the task says a reset is required; other components take the new
// version at once. The version is the image's file name without its
// extension.
func (s *Server) advanceTask(uri string, t map[string]any) {
	if t["TaskState"] != "Running" {
		return
	}
	s.taskPolls[uri]++
	if s.taskPolls[uri] < s.opts.TaskPolls {
		t["PercentComplete"] = 100 * s.taskPolls[uri] / s.opts.TaskPolls
		return
	}
	ut, ok := s.tasks[uri]
	if !ok {
		t["TaskState"], t["PercentComplete"] = "Completed", 100
		return
	}
	if _, err := fetchImage(ut.image); err != nil {
		t["TaskState"], t["TaskStatus"] = "Exception", "Critical"
		t["Messages"] = []any{map[string]any{"MessageId": "Update.1.0.TransferFailed", "Severity": "Critical",
			"Message": "Transfer of image " + ut.image + " failed: " + err.Error(), "MessageArgs": []any{ut.image}}}
		return
	}
	version := strings.TrimSuffix(path.Base(ut.image), path.Ext(ut.image))
	var msgs []any
	for _, target := range ut.targets {
		if target == biosInventory {
			s.fwPending[target] = version
			msgs = append(msgs, map[string]any{"MessageId": "Base.1.8.ResetRequired", "Severity": "Warning",
				"Message": "The update of " + target + " takes effect at the next system reset.", "MessageArgs": []any{target}})
			continue
		}
		s.res[target]["Version"] = version
		msgs = append(msgs, map[string]any{"MessageId": "Update.1.0.UpdateSuccessful", "Severity": "OK",
			"Message": target + " was updated.", "MessageArgs": []any{target}})
	}
	t["TaskState"], t["PercentComplete"], t["Messages"] = "Completed", 100, msgs
}

// FirmwareVersion returns the version the inventory member at uri
// reports.
func (s *Server) FirmwareVersion(uri string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, _ := s.res[uri]["Version"].(string)
	return v
}

func (s *Server) patch(w http.ResponseWriter, uri string, body map[string]any) {
	r, ok := s.res[uri]
	if !ok {
		writeError(w, http.StatusNotFound, "Base.1.5.0.ResourceMissingAtURI", uri+" not found")
		return
	}
	sp := s.systemOf(uri)
	switch {
	case sp != "" && uri == sp:
		if boot, ok := body["Boot"].(map[string]any); ok {
			cur := r["Boot"].(map[string]any)
			if t, ok := boot["BootSourceOverrideTarget"].(string); ok {
				allowed := cur["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any)
				found := false
				for _, a := range allowed {
					found = found || a == t
				}
				if !found {
					writeError(w, http.StatusBadRequest, "Base.1.5.0.PropertyValueNotInList", "BootSourceOverrideTarget "+t)
					return
				}
			}
			for _, k := range []string{"BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode"} {
				if v, ok := boot[k]; ok {
					cur[k] = v
				}
			}
			if t, ok := boot["BootSourceOverrideTarget"].(string); ok {
				if s.stats.SystemBootPatches == nil {
					s.stats.SystemBootPatches = map[string][]string{}
				}
				s.stats.SystemBootPatches[path.Base(sp)] = append(s.stats.SystemBootPatches[path.Base(sp)], t)
			}
		}
		for _, k := range []string{"IndicatorLED", "LocationIndicatorActive"} {
			if v, ok := body[k]; ok {
				r[k] = v
			}
		}
	case sp != "" && uri == sp+"/SecureBoot":
		if v, ok := body["SecureBootEnable"].(bool); ok {
			r["SecureBootEnable"] = v
			if v {
				r["SecureBootCurrentBoot"] = "Enabled"
			} else {
				r["SecureBootCurrentBoot"] = "Disabled"
			}
		}
	case sp != "" && uri == sp+"/Bios/Settings":
		attrs, ok := body["Attributes"].(map[string]any)
		if !ok {
			writeError(w, http.StatusBadRequest, "Base.1.5.0.PropertyMissing", "Attributes is required")
			return
		}
		cur := s.res[sp+"/Bios"]["Attributes"].(map[string]any)
		for k, v := range attrs {
			if _, ok := cur[k]; !ok {
				writeError(w, http.StatusBadRequest, "Base.1.5.0.PropertyUnknown", "unknown attribute "+k)
				return
			}
			if code, msg := checkBiosValue(k, v); code != "" {
				writeError(w, http.StatusBadRequest, code, msg)
				return
			}
		}
		st := s.sysState[sp]
		if st.biosPend == nil {
			st.biosPend = map[string]any{}
		}
		for k, v := range attrs {
			st.biosPend[k] = v
		}
		r["Attributes"] = deepCopy(st.biosPend)
	default:
		writeError(w, http.StatusMethodNotAllowed, "Base.1.5.0.OperationNotAllowed", "PATCH not supported on "+uri)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) delete(w http.ResponseWriter, uri string) {
	switch {
	case strings.HasPrefix(uri, sessionsURI+"/") && s.res[uri] != nil:
		for tok, u := range s.sessions {
			if u == uri {
				delete(s.sessions, tok)
			}
		}
		delete(s.res, uri)
		s.removeMember(sessionsURI, uri)
		s.stats.SessionsDeleted++
		w.WriteHeader(http.StatusNoContent)
	case strings.Contains(uri, "/Volumes/") && s.res[uri] != nil:
		delete(s.res, uri)
		s.removeMember(path.Dir(uri), uri)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusMethodNotAllowed, "Base.1.5.0.OperationNotAllowed", "DELETE not supported on "+uri)
	}
}

// Volumes returns the URIs of the volumes of the storage subsystem, sorted.
func (s *Server) Volumes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for uri := range s.res {
		if strings.HasPrefix(uri, systemPath+"/Storage/1/Volumes/") {
			out = append(out, uri)
		}
	}
	sort.Strings(out)
	return out
}

// checkBiosValue checks a pending BIOS setting against the attribute
// registry as a BMC does: a read-only attribute is not writable, an
// enumeration takes one of its values, an integer a whole number, a
// string a string. It returns the Redfish message id and text of a
// refusal, or "".
func checkBiosValue(name string, v any) (string, string) {
	entries, _ := biosRegistry("")["RegistryEntries"].(map[string]any)["Attributes"].([]any)
	for _, e := range entries {
		a := e.(map[string]any)
		if a["AttributeName"] != name {
			continue
		}
		if ro, _ := a["ReadOnly"].(bool); ro {
			return "Base.1.5.0.PropertyNotWritable", "BIOS attribute " + name + " is read-only"
		}
		switch a["Type"] {
		case "Enumeration":
			str, _ := v.(string)
			vals, _ := a["Value"].([]any)
			for _, allowed := range vals {
				if allowed.(map[string]any)["ValueName"] == str && str != "" {
					return "", ""
				}
			}
			return "Base.1.5.0.PropertyValueNotInList", fmt.Sprintf("BIOS attribute %s: %v is not one of its values", name, v)
		case "Integer":
			if f, ok := v.(float64); !ok || f != float64(int64(f)) {
				return "Base.1.5.0.PropertyValueTypeError", fmt.Sprintf("BIOS attribute %s: %v is not an integer", name, v)
			}
		case "String":
			if _, ok := v.(string); !ok {
				return "Base.1.5.0.PropertyValueTypeError", fmt.Sprintf("BIOS attribute %s: %v is not a string", name, v)
			}
		}
	}
	return "", ""
}
