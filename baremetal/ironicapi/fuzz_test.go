package ironicapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// fuzzHandler is the API handler on a started conductor with a few
// nodes, for fuzz targets (which cannot use newLab's *testing.T).
func fuzzHandler(tb testing.TB) http.Handler {
	tb.Helper()
	store := sqlstoretest.OpenSQLite(tb, clock.System())
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		tb.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "fuzz"})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Stop(context.Background()) })
	for i := 0; i < 5; i++ {
		n := &baremetal.Node{Name: fmt.Sprintf("fz%d", i), Driver: "fake-hardware", Owner: []string{"a", "b"}[i%2],
			ResourceClass: "gold", Description: "rack"}
		if _, err := c.Enroll(ctx, n); err != nil {
			tb.Fatal(err)
		}
	}
	h, err := ironicapi.New(ironicapi.Options{Conductor: c, Drivers: reg})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// checkIronicAnswer fails unless rec holds no 5xx and either Ironic's
// error body or, for a 200, a JSON object with the listing key.
func checkIronicAnswer(t *testing.T, rec *httptest.ResponseRecorder, listKey, what string) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s: status %d: %s", what, rec.Code, rec.Body.String())
	}
	if rec.Code == http.StatusOK {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s: listing is not JSON: %v", what, err)
		}
		var items []map[string]any
		if err := json.Unmarshal(doc[listKey], &items); err != nil {
			t.Fatalf("%s: %q is not a list: %s", what, listKey, rec.Body.String())
		}
		if next, ok := doc["next"]; ok {
			var s string
			if json.Unmarshal(next, &s) != nil || !strings.Contains(s, "marker=") {
				t.Fatalf("%s: bad next %s", what, next)
			}
		}
		return
	}
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &outer); err != nil || outer.ErrorMessage == "" {
		t.Fatalf("%s: status %d without Ironic's error body: %q", what, rec.Code, rec.Body.String())
	}
	var inner struct {
		FaultCode   string `json:"faultcode"`
		FaultString string `json:"faultstring"`
	}
	if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil || inner.FaultCode != "Client" || inner.FaultString == "" {
		t.Fatalf("%s: inner error %q", what, outer.ErrorMessage)
	}
}

// FuzzNodeListQuery sends arbitrary query strings and versions to the
// node listings and the node history: every answer is a listing or
// Ironic's client error, never a server error.
func FuzzNodeListQuery(f *testing.F) {
	h := fuzzHandler(f)
	seeds := []struct {
		path    uint8
		query   string
		version string
	}{
		{0, "limit=2&sort_key=name&sort_dir=desc", "1.89"},
		{0, "fields=uuid,name&owner=a", "1.89"},
		{0, "detail=True&resource_class=gold&maintenance=false", "1.89"},
		{0, "marker=00000000-0000-0000-0000-000000000000&limit=1", "1.89"},
		{0, "provision_state=enroll&driver=fake-hardware&fault=power%20failure", "1.42"},
		{0, "shard=a,b&lessee=x&conductor=fuzz&conductor_group=G", "1.89"},
		{0, "limit=0&sort_key=properties", "1.1"},
		{1, "associated=true&instance_uuid=zz&description_contains=rack", "1.89"},
		{1, "sort_key=owner&limit=99999999999999999999", "latest"},
		{2, "detail=True&limit=1&sort_dir=desc", "1.78"},
		{2, "marker=bad&limit=x", "1.78"},
	}
	for _, s := range seeds {
		f.Add(s.path, s.query, s.version)
	}
	paths := []string{"/v1/nodes", "/v1/nodes/detail", "/v1/nodes/fz1/history"}
	f.Fuzz(func(t *testing.T, which uint8, query, version string) {
		if len(query) > 4096 || len(version) > 64 {
			return
		}
		path := paths[int(which)%len(paths)]
		req := httptest.NewRequest("GET", "http://127.0.0.1"+path, nil)
		req.URL.RawQuery = query
		if version != "" {
			req.Header["X-Openstack-Ironic-Api-Version"] = []string{version}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		key := "nodes"
		if strings.HasSuffix(path, "/history") {
			key = "history"
		}
		checkIronicAnswer(t, rec, key, fmt.Sprintf("GET %s?%s at %q", path, query, version))
	})
}

// FuzzProvisionBody sends arbitrary provision and power bodies to a
// node: every answer is 202 or Ironic's client error, never a 5xx.
func FuzzProvisionBody(f *testing.F) {
	h := fuzzHandler(f)
	for _, s := range []string{
		`{"target":"manage"}`, `{"target":"active","configdrive":{"meta_data":{}}}`,
		`{"target":"clean","clean_steps":[{"interface":"bios","step":"factory_reset"}]}`,
		`{"target":"rescue","rescue_password":""}`, `{"target":"abort"}`, `{"target":"deploy","deploy_steps":[{}]}`,
		`{"target":"power on","timeout":"5"}`, `{"target":"soft power off","timeout":1e99}`, `[]`, `{"target":null}`,
		`{"target":"service","service_steps":[1],"disable_ramdisk":"yes"}`, `{"target":"clean","runbook":"x"}`,
	} {
		f.Add(uint8(0), s, "1.89")
		f.Add(uint8(1), s, "latest")
	}
	f.Fuzz(func(t *testing.T, which uint8, body, version string) {
		if len(body) > 8192 || len(version) > 64 {
			return
		}
		node := fmt.Sprintf("fz%d", int(which/2)%5)
		path := "/v1/nodes/" + node + "/states/provision"
		if which%2 == 1 {
			path = "/v1/nodes/" + node + "/states/power"
		}
		req := httptest.NewRequest("PUT", "http://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if version != "" {
			req.Header["X-Openstack-Ironic-Api-Version"] = []string{version}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusAccepted {
			return
		}
		checkIronicAnswer(t, rec, "", fmt.Sprintf("PUT %s %q at %q", path, body, version))
	})
}
