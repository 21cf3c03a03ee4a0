package ironicapi_test

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/conductors"
)

func TestConductorsThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	s := l.c.Store()
	for _, r := range []baremetal.ConductorRegistration{
		{Hostname: "b-peer", ConductorGroup: "rack-2", Drivers: []string{"redfish"}},
		{Hostname: "a-gone", Drivers: []string{"ipmi"}},
	} {
		if _, err := s.RegisterConductor(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UnregisterConductor(ctx, "a-gone"); err != nil {
		t.Fatal(err)
	}
	sc := l.client(t, "1.49")
	pages, err := conductors.List(sc, conductors.ListOpts{Detail: true}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := conductors.ExtractConductors(pages)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range all {
		got = append(got, c.Hostname+"/"+c.ConductorGroup+"/"+strings.Join(c.Drivers, "+")+"/"+map[bool]string{true: "alive", false: "dead"}[c.Alive])
		if c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() {
			t.Errorf("%s: timestamps %v %v", c.Hostname, c.CreatedAt, c.UpdatedAt)
		}
	}
	if strings.Join(got, " ") != "api-test//fake-hardware/alive b-peer/rack-2/redfish/alive a-gone//ipmi/dead" {
		t.Fatalf("conductors in registration order: %v", got)
	}
	one, err := conductors.Get(ctx, sc, "api-test").Extract()
	if err != nil || !one.Alive || one.Hostname != "api-test" || len(one.Drivers) != 1 {
		t.Fatalf("get: %+v, %v", one, err)
	}
	if _, err := conductors.Get(ctx, sc, "nobody").Extract(); err == nil {
		t.Fatal("an unknown conductor was found")
	}
	pages, err = conductors.List(sc, conductors.ListOpts{Limit: 1, SortKey: "hostname", SortDir: "desc"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paged, _ := conductors.ExtractConductors(pages)
	got = got[:0]
	for _, c := range paged {
		got = append(got, c.Hostname)
	}
	if strings.Join(got, ",") != "b-peer,api-test,a-gone" {
		t.Fatalf("paged one at a time by hostname, descending: %v", got)
	}
}

func TestConductorsRaw(t *testing.T) {
	l := newLab(t)
	cases := []struct {
		path, version string
		status        int
		keys          string
	}{
		{"/v1/conductors", "1.48", 404, ""},
		{"/v1/conductors/api-test", "1.48", 404, ""},
		{"/v1/conductors", "1.49", 200, "alive,conductor_group,hostname,links"},
		{"/v1/conductors?detail=True", "1.49", 200, "alive,conductor_group,created_at,drivers,hostname,links,updated_at"},
		{"/v1/conductors?fields=hostname,drivers", "1.49", 200, "drivers,hostname,links"},
		{"/v1/conductors/api-test?fields=alive", "1.49", 200, "alive,links"},
		{"/v1/conductors?fields=colour", "1.49", 400, ""},
		{"/v1/conductors?fields=hostname&detail=True", "1.49", 400, ""},
		{"/v1/conductors?sort_key=alive", "1.49", 400, ""},
		{"/v1/conductors?marker=nobody", "1.49", 404, ""},
		{"/v1/conductors/nobody", "1.49", 404, ""},
	}
	for _, tc := range cases {
		st, _, body := do(t, "GET", l.srv.URL+tc.path, tc.version, "")
		if st != tc.status {
			t.Errorf("%s at %s: %d, want %d: %s", tc.path, tc.version, st, tc.status, body)
			continue
		}
		if st != 200 {
			if faultString(t, body) == "" {
				t.Errorf("%s: no faultstring", tc.path)
			}
			continue
		}
		m := decodeJSON(t, body)
		if list, ok := m["conductors"].([]any); ok {
			m = list[0].(map[string]any)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		if got := strings.Join(slices.Sorted(slices.Values(keys)), ","); got != tc.keys {
			t.Errorf("%s: keys %s, want %s", tc.path, got, tc.keys)
		}
	}
	// The self link names the conductor by hostname.
	_, _, body := do(t, "GET", l.srv.URL+"/v1/conductors/api-test", "1.49", "")
	var c struct {
		Links []struct{ Href, Rel string } `json:"links"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || len(c.Links) != 2 {
		t.Fatalf("links %s", body)
	}
	if u, _ := url.Parse(c.Links[0].Href); u.Path != "/v1/conductors/api-test" || c.Links[0].Rel != "self" {
		t.Fatalf("self link %v", c.Links[0])
	}
}
