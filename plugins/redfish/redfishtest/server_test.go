package redfishtest

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
)

func do(t *testing.T, c *http.Client, s *Server, method, uri, token string, body any) (*http.Response, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, s.URL()+uri, rd)
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

func TestStatefulService(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		s, err := New(Options{TLS: useTLS})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := http.DefaultClient
		if useTLS {
			c = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CertPool()}}}
		}
		if resp, _ := do(t, c, s, "GET", "/redfish/v1/", "", nil); resp.StatusCode != 200 {
			t.Fatalf("service root is public, got %d", resp.StatusCode)
		}
		if resp, _ := do(t, c, s, "GET", "/redfish/v1/Systems", "", nil); resp.StatusCode != 401 {
			t.Fatalf("want 401 without credentials, got %d", resp.StatusCode)
		}
		if resp, _ := do(t, c, s, "POST", "/redfish/v1/SessionService/Sessions", "", map[string]string{"UserName": "admin", "Password": "wrong"}); resp.StatusCode != 401 {
			t.Fatalf("bad login: %d", resp.StatusCode)
		}
		resp, _ := do(t, c, s, "POST", "/redfish/v1/SessionService/Sessions", "", map[string]string{"UserName": "admin", "Password": "password"})
		tok, loc := resp.Header.Get("X-Auth-Token"), resp.Header.Get("Location")
		if resp.StatusCode != 201 || tok == "" || loc == "" || s.ActiveSessions() != 1 {
			t.Fatalf("login: %d %q %q", resp.StatusCode, tok, loc)
		}
		sys := "/redfish/v1/Systems/" + SystemID
		if resp, _ := do(t, c, s, "POST", sys+"/Actions/ComputerSystem.Reset", tok, map[string]string{"ResetType": "On"}); resp.StatusCode != 204 || s.PowerState() != "On" {
			t.Fatalf("reset: %d power=%s", resp.StatusCode, s.PowerState())
		}
		if resp, _ := do(t, c, s, "POST", sys+"/Actions/ComputerSystem.Reset", tok, map[string]string{"ResetType": "Explode"}); resp.StatusCode != 400 {
			t.Fatalf("unknown reset type: %d", resp.StatusCode)
		}
		do(t, c, s, "PATCH", sys, tok, map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous"}})
		if _, m := do(t, c, s, "GET", sys, tok, nil); m["Boot"].(map[string]any)["BootSourceOverrideTarget"] != "Cd" {
			t.Fatalf("boot override not read back: %v", m["Boot"])
		}
		cd := sys + "/VirtualMedia/CD1"
		do(t, c, s, "POST", cd+"/Actions/VirtualMedia.InsertMedia", tok, map[string]any{"Image": "http://x/y.iso"})
		if _, m := do(t, c, s, "GET", cd, tok, nil); m["Inserted"] != true || m["Image"] != "http://x/y.iso" {
			t.Fatalf("insert: %v", m)
		}
		do(t, c, s, "POST", cd+"/Actions/VirtualMedia.EjectMedia", tok, map[string]any{})
		if _, m := do(t, c, s, "GET", cd, tok, nil); m["Inserted"] != false {
			t.Fatalf("eject: %v", m)
		}
		vols := sys + "/Storage/1/Volumes"
		resp, _ = do(t, c, s, "POST", vols, tok, map[string]any{"RAIDType": "RAID0", "CapacityBytes": 1e9})
		if resp.StatusCode != 201 {
			t.Fatalf("create volume: %d", resp.StatusCode)
		}
		if _, m := do(t, c, s, "GET", resp.Header.Get("Location"), tok, nil); m["RAIDType"] != "RAID0" {
			t.Fatalf("volume: %v", m)
		}
		if resp, _ := do(t, c, s, "DELETE", loc, tok, nil); resp.StatusCode != 204 || s.ActiveSessions() != 0 {
			t.Fatalf("logout: %d", resp.StatusCode)
		}
		if resp, _ := do(t, c, s, "GET", sys, tok, nil); resp.StatusCode != 401 {
			t.Fatalf("token must die with its session: %d", resp.StatusCode)
		}
		s.FailNext(503)
		req, _ := http.NewRequest("GET", s.URL()+sys, nil)
		req.SetBasicAuth("admin", "password")
		r, err := c.Do(req)
		if err != nil || r.StatusCode != 503 {
			t.Fatalf("injected failure: %v %v", r, err)
		}
		r.Body.Close()
	}
}

func basic(t *testing.T, s *Server, method, uri string, body any) (*http.Response, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	b, _ := json.Marshal(body)
	if body == nil {
		b = nil
	}
	rd = bytes.NewReader(b)
	req, _ := http.NewRequest(method, s.URL()+uri, rd)
	req.SetBasicAuth("admin", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// TestSeveralSystemsAndNoSessions checks the sushy-tools behaviours the
// double models: several systems behind one address, each with its own
// UUID and state, and a service without sessions (no session service in
// the root; a session POST answers 401 without Basic credentials and 404
// with them).
func TestSeveralSystemsAndNoSessions(t *testing.T) {
	s, err := New(Options{Systems: 3, NoSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, root := do(t, http.DefaultClient, s, "GET", "/redfish/v1/", "", nil)
	if root["SessionService"] != nil || root["Links"] != nil {
		t.Fatalf("root names a session service: %v", root)
	}
	if resp, _ := do(t, http.DefaultClient, s, "POST", "/redfish/v1/SessionService/Sessions", "", map[string]string{"UserName": "admin", "Password": "password"}); resp.StatusCode != 401 {
		t.Fatalf("session POST without Basic: %d, want 401", resp.StatusCode)
	}
	if resp, _ := basic(t, s, "POST", "/redfish/v1/SessionService/Sessions", map[string]string{"UserName": "admin", "Password": "password"}); resp.StatusCode != 404 {
		t.Fatalf("session POST with Basic: %d, want 404", resp.StatusCode)
	}
	if resp, _ := basic(t, s, "GET", "/redfish/v1/SessionService", nil); resp.StatusCode != 404 {
		t.Fatalf("SessionService: %d, want 404", resp.StatusCode)
	}
	_, coll := basic(t, s, "GET", "/redfish/v1/Systems", nil)
	if n := coll["Members@odata.count"]; n != 3.0 {
		t.Fatalf("systems: %v", coll)
	}
	ids := s.SystemIDs()
	uuids := map[string]bool{}
	for _, id := range ids {
		_, m := basic(t, s, "GET", SystemPath(id), nil)
		uuids[m["UUID"].(string)] = true
		if m["Id"] != id {
			t.Fatalf("system %s reports Id %v", id, m["Id"])
		}
	}
	if len(uuids) != 3 {
		t.Fatalf("systems share UUIDs: %v", uuids)
	}
	if resp, _ := basic(t, s, "POST", SystemPath(ids[1])+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"}); resp.StatusCode != 204 {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	basic(t, s, "PATCH", SystemPath(ids[2]), map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Cd"}})
	st := s.Stats()
	if s.SystemPowerState(ids[1]) != "On" || s.SystemPowerState(ids[0]) != "Off" || s.SystemPowerState(ids[2]) != "Off" ||
		len(st.SystemResets[ids[1]]) != 1 || len(st.SystemBootPatches[ids[2]]) != 1 || len(st.SystemBootPatches[ids[1]]) != 0 {
		t.Fatalf("actions crossed systems: %+v", st)
	}
	if !s.SetSystemUUID(ids[0], "other") || s.Resource(SystemPath(ids[0]))["UUID"] != "other" {
		t.Fatal("SetSystemUUID")
	}
}

// TestStrictBIOSAndUpdates: the server refuses what a BMC refuses in
// pending BIOS settings and SimpleUpdate requests.
func TestStrictBIOSAndUpdates(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &http.Client{Transport: &basicAuth{}}
	settings := "/redfish/v1/Systems/" + SystemID + "/Bios/Settings"
	for _, tc := range []struct {
		attrs map[string]any
		code  int
		id    string
	}{
		{map[string]any{"EmbeddedSata": "Ahci"}, 400, "PropertyNotWritable"},
		{map[string]any{"ProcTurboMode": "Sometimes"}, 400, "PropertyValueNotInList"},
		{map[string]any{"ProcCoreDisable": "two"}, 400, "PropertyValueTypeError"},
		{map[string]any{"AdminPhone": 5}, 400, "PropertyValueTypeError"},
		{map[string]any{"NoSuch": "x"}, 400, "PropertyUnknown"},
		{map[string]any{"ProcTurboMode": "Disabled", "ProcCoreDisable": 2.0}, 204, ""},
	} {
		resp, body := do(t, c, s, "PATCH", settings, "", map[string]any{"Attributes": tc.attrs})
		if resp.StatusCode != tc.code {
			t.Fatalf("PATCH %v: %d, want %d", tc.attrs, resp.StatusCode, tc.code)
		}
		if tc.id != "" {
			b, _ := json.Marshal(body)
			if !bytes.Contains(b, []byte(tc.id)) {
				t.Fatalf("PATCH %v: %s, want %s", tc.attrs, b, tc.id)
			}
		}
	}
	// Pending until the next reset.
	if _, b := do(t, c, s, "GET", "/redfish/v1/Systems/"+SystemID+"/Bios", "", nil); b["Attributes"].(map[string]any)["ProcTurboMode"] != "Enabled" {
		t.Fatal("a pending setting applied before the reset")
	}
	do(t, c, s, "POST", "/redfish/v1/Systems/"+SystemID+"/Actions/ComputerSystem.Reset", "", map[string]string{"ResetType": "On"})
	if _, b := do(t, c, s, "GET", "/redfish/v1/Systems/"+SystemID+"/Bios", "", nil); b["Attributes"].(map[string]any)["ProcTurboMode"] != "Disabled" {
		t.Fatal("the pending setting was not applied at the reset")
	}
	update := "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
	for _, body := range []map[string]any{
		{},
		{"ImageURI": "ftp://127.0.0.1/fw.bin"},
		{"ImageURI": "http://127.0.0.1/fw.bin", "Bogus": 1},
		{"ImageURI": "http://127.0.0.1/fw.bin", "TransferProtocol": "NFS"},
		{"ImageURI": "http://127.0.0.1/fw.bin", "Targets": []string{"/redfish/v1/Systems/" + SystemID}},
		{"ImageURI": "http://127.0.0.1/fw.bin", "Targets": "BIOS"},
	} {
		if resp, _ := do(t, c, s, "POST", update, "", body); resp.StatusCode != 400 {
			t.Fatalf("SimpleUpdate %v: %d, want 400", body, resp.StatusCode)
		}
	}
}

type basicAuth struct{}

func (basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r.SetBasicAuth("admin", "password")
	return http.DefaultTransport.RoundTrip(r)
}
