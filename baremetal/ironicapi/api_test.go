package ironicapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// do sends a raw request and returns the status, headers and body.
func do(t *testing.T, method, url, version, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if version != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// faultString unwraps Ironic's error body.
func faultString(t *testing.T, body string) string {
	t.Helper()
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if err := json.Unmarshal([]byte(body), &outer); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	var inner struct {
		FaultCode   string  `json:"faultcode"`
		FaultString string  `json:"faultstring"`
		DebugInfo   *string `json:"debuginfo"`
	}
	if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil {
		t.Fatalf("inner error %q: %v", outer.ErrorMessage, err)
	}
	if inner.FaultCode != "Client" && inner.FaultCode != "Server" {
		t.Fatalf("faultcode %q", inner.FaultCode)
	}
	return inner.FaultString
}

func TestVersionNegotiation(t *testing.T) {
	l := newLab(t)
	cases := []struct {
		name, header string
		status       int
		version      string
		fault        string
	}{
		{"none is the minimum", "", 200, "1.1", ""},
		{"exact", "1.78", 200, "1.78", ""},
		{"latest is the maximum", "latest", 200, "1.115", ""},
		{"above the maximum", "1.999", 406, "", "Version 1.999 was requested but the minor version is not supported by this service. The supported version range is: [1.1, 1.115]."},
		{"other major", "2.0", 406, "", "Mutually exclusive versions requested."},
		{"garbage", "one.two", 406, "", "Invalid value for X-OpenStack-Ironic-API-Version header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := do(t, "GET", l.srv.URL+"/v1/nodes", tc.header, "")
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if hdr.Get("X-OpenStack-Ironic-API-Minimum-Version") != "1.1" || hdr.Get("X-OpenStack-Ironic-API-Maximum-Version") != "1.115" {
				t.Fatalf("min/max headers %v", hdr)
			}
			if tc.version != "" && hdr.Get("X-OpenStack-Ironic-API-Version") != tc.version {
				t.Fatalf("version header %q, want %q", hdr.Get("X-OpenStack-Ironic-API-Version"), tc.version)
			}
			if tc.fault != "" && !strings.HasPrefix(faultString(t, body), tc.fault) {
				t.Fatalf("fault %q, want prefix %q", faultString(t, body), tc.fault)
			}
		})
	}
	// The service-type header wins over the legacy one.
	req, _ := http.NewRequest("GET", l.srv.URL+"/v1/", nil)
	req.Header.Set("OpenStack-API-Version", "baremetal 1.89")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-OpenStack-Ironic-API-Version"); got != "1.89" {
		t.Fatalf("OpenStack-API-Version: negotiated %q", got)
	}
}

func TestRootDocuments(t *testing.T) {
	l := newLab(t)
	st, _, body := do(t, "GET", l.srv.URL+"/", "", "")
	if st != 200 {
		t.Fatalf("GET /: %d %s", st, body)
	}
	var root struct {
		Name           string `json:"name"`
		DefaultVersion struct {
			ID, Version, MinVersion string
		} `json:"default_version"`
	}
	if err := json.Unmarshal([]byte(body), &root); err != nil {
		t.Fatal(err)
	}
	if root.Name != "OpenStack Ironic API" || root.DefaultVersion.ID != "v1" || root.DefaultVersion.Version != "1.115" {
		t.Fatalf("root %+v", root)
	}
	_, _, v1 := do(t, "GET", l.srv.URL+"/v1/", "1.52", "")
	var doc map[string]any
	if err := json.Unmarshal([]byte(v1), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodes", "ports", "drivers", "allocations", "conductors"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("GET /v1/ at 1.52 lacks %s", k)
		}
	}
	if _, ok := doc["runbooks"]; ok {
		t.Errorf("GET /v1/ at 1.52 links runbooks (1.92)")
	}
	st, _, body = do(t, "GET", l.srv.URL+"/v1/nothing-here", "", "")
	if st != 404 || faultString(t, body) == "" {
		t.Fatalf("unknown path: %d %s", st, body)
	}
}

func TestNodeCreateGetListDeleteThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	n, err := nodes.Create(ctx, sc, nodes.CreateOpts{
		Name:       "ns~host-1",
		Driver:     "fake-hardware",
		DriverInfo: map[string]any{"fake_password": "s3cret", "deploy_kernel": "http://192.0.2.1/k"},
		Properties: map[string]any{"cpu_arch": "x86_64", "memory_mb": 4096},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if n.ProvisionState != "enroll" || n.Name != "ns~host-1" || n.UUID == "" || n.PowerInterface == "" {
		t.Fatalf("created %+v", n)
	}
	if n.DriverInfo["fake_password"] != "******" {
		t.Fatalf("password shown: %v", n.DriverInfo["fake_password"])
	}
	got, err := nodes.Get(ctx, sc, "ns~host-1").Extract()
	if err != nil || got.UUID != n.UUID {
		t.Fatalf("get by name: %v %+v", err, got)
	}
	pages, err := nodes.ListDetail(sc, nil).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := nodes.ExtractNodes(pages)
	if err != nil || len(all) != 1 || all[0].UUID != n.UUID {
		t.Fatalf("list detail: %v %+v", err, all)
	}
	if err := nodes.Delete(ctx, sc, n.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Get(ctx, sc, n.UUID).Extract(); err == nil {
		t.Fatal("node still there after delete")
	}
	// A missing driver is Ironic's 400.
	st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes", "1.89", `{"name":"x"}`)
	if st != 400 || !strings.Contains(faultString(t, body), "driver") {
		t.Fatalf("no driver: %d %s", st, body)
	}
}

func TestNodePatchThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	n, err := nodes.Create(ctx, sc, nodes.CreateOpts{Name: "p1", Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	got, err := nodes.Update(ctx, sc, n.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/fake_password", Value: "pw"},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/name", Value: "p2"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/memory_mb", Value: 2048},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/automated_clean", Value: "false"},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "p2" || got.DriverInfo["fake_password"] != "******" || got.Properties["memory_mb"] != 2048.0 {
		t.Fatalf("patched %+v", got)
	}
	if got.AutomatedClean == nil || *got.AutomatedClean {
		t.Fatalf("automated_clean %v: the string \"false\" is coerced as Ironic does", got.AutomatedClean)
	}
	stored, _ := l.c.Store().GetNode(ctx, n.UUID)
	if stored.DriverInfo["fake_password"] != "pw" {
		t.Fatalf("stored driver_info %v", stored.DriverInfo)
	}
	for _, tc := range []struct{ body, want string }{
		{`[{"op":"add","path":"/foo","value":1}]`, "Adding a new attribute (/foo)"},
		{`[{"op":"replace","path":"/provision_state","value":"active"}]`, "internal attribute"},
		{`[{"op":"replace","path":"/maintenance","value":"maybe"}]`, "maintenance"},
	} {
		st, _, body := do(t, "PATCH", l.srv.URL+"/v1/nodes/"+n.UUID, "1.89", tc.body)
		if st != 400 || !strings.Contains(faultString(t, body), tc.want) {
			t.Errorf("%s: %d %s", tc.body, st, body)
		}
	}
	after, _ := l.c.Store().GetNode(ctx, n.UUID)
	if after.Version != stored.Version || after.Reservation != "" {
		t.Fatalf("a refused patch wrote (version %d → %d) or left a lock %q", stored.Version, after.Version, after.Reservation)
	}
}

func TestLockedNodeIsIronicsConflict(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	n, err := nodes.Create(ctx, l.client(t, "1.89"), nodes.CreateOpts{Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.Store().ReserveNode(ctx, n.UUID, "other-host"); err != nil {
		t.Fatal(err)
	}
	st, hdr, body := do(t, "PATCH", l.srv.URL+"/v1/nodes/"+n.UUID, "1.89", `[{"op":"add","path":"/extra/a","value":1}]`)
	want := "Node " + n.UUID + " is locked by host other-host, please retry after the current operation is completed."
	if st != 409 || faultString(t, body) != want || hdr.Get("Retry-After") == "" {
		t.Fatalf("locked: %d %v %s", st, hdr, body)
	}
}
