package tempestlab

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func tokenRequest(user, password, scope string) string {
	return `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"` + user +
		`","password":"` + password + `","domain":{"name":"Default"}}}},"scope":` + scope + `}}`
}

// TestKeystoneTokens: the token service answers tempest's v3 password
// authentication as Keystone does, refuses what Keystone refuses, and
// validates the tokens it issued until they expire.
func TestKeystoneTokens(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ks := &Keystone{
		Accounts: []Account{
			{User: "admin", Password: "pw", Project: "demo", Roles: []string{"admin"}},
			{User: "sys", Password: "pw", System: true, Roles: []string{"admin"}},
		},
		Catalog: []Endpoint{{Type: "baremetal", Name: "ironic", URL: "http://127.0.0.1:6385"}},
		Region:  "RegionOne", TTL: time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
	}
	srv := httptest.NewServer(ks)
	defer srv.Close()
	post := func(body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v3/auth/tokens", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp, doc
	}
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"project", tokenRequest("admin", "pw", `{"project":{"name":"demo","domain":{"name":"Default"}}}`), 201},
		{"system", tokenRequest("sys", "pw", `{"system":{"all":true}}`), 201},
		{"wrong password", tokenRequest("admin", "nope", `{"project":{"name":"demo"}}`), 401},
		{"unknown user", tokenRequest("who", "pw", `{"project":{"name":"demo"}}`), 401},
		{"other project", tokenRequest("admin", "pw", `{"project":{"name":"other"}}`), 401},
		{"project user asks for the system", tokenRequest("admin", "pw", `{"system":{"all":true}}`), 401},
		{"unscoped", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"admin","password":"pw"}}}}}`, 401},
		{"token method", `{"auth":{"identity":{"methods":["token"],"token":{"id":"x"}}}}`, 400},
		{"malformed", `{"auth":`, 400},
		{"oversized", `{"auth":"` + strings.Repeat("a", maxTokenRequest) + `"}`, 400},
	} {
		resp, doc := post(c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %v, want %d", c.name, resp.StatusCode, doc, c.status)
			continue
		}
		if c.status != 201 {
			continue
		}
		tok := resp.Header.Get("X-Subject-Token")
		token, _ := doc["token"].(map[string]any)
		cat, _ := token["catalog"].([]any)
		if tok == "" || token["expires_at"] != "2026-12-07T08:01:00.000000Z" || len(cat) != 1 {
			t.Errorf("%s: token %q, body %v", c.name, tok, doc)
		}
		svc, _ := cat[0].(map[string]any)
		eps, _ := svc["endpoints"].([]any)
		ep, _ := eps[0].(map[string]any)
		if svc["type"] != "baremetal" || ep["url"] != "http://127.0.0.1:6385" || ep["interface"] != "public" || ep["region"] != "RegionOne" {
			t.Errorf("%s: catalog %v", c.name, cat)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v3/auth/tokens", nil)
		req.Header.Set("X-Subject-Token", tok)
		vr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		vr.Body.Close()
		if vr.StatusCode != 200 {
			t.Errorf("%s: validating the token: %d", c.name, vr.StatusCode)
		}
		advance(2 * time.Minute)
		if vr, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		vr.Body.Close()
		if vr.StatusCode != 404 {
			t.Errorf("%s: an expired token validates: %d", c.name, vr.StatusCode)
		}
		advance(-2 * time.Minute)
	}
	resp, err := http.Get(srv.URL + "/v3/users")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /v3/users = %d, want 404", resp.StatusCode)
	}
}
