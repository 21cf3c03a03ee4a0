package ironicapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/httpbasic"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"golang.org/x/crypto/bcrypt"
)

// ironicFixture is the user file of Ironic's own middleware test: user
// myName, password myPassword, a $2y$ hash at cost 5, then blank lines.
const ironicFixture = "myName:$2y$05$lE3eGtyj41jZwrzS87KTqe6.JETVCWBkc32C63UP2aYrGoYOEpbJm\n\n\n"

func hashOf(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestParseHTPasswd(t *testing.T) {
	good := hashOf(t, "pw")
	tests := []struct {
		name     string
		data     string
		users    int
		wantLine int    // 0: no error expected unless wantText is set
		wantText string // substring of the error
	}{
		{name: "ironic fixture", data: ironicFixture, users: 1},
		{name: "two users, blank and colon-less lines skipped", data: "\nalice:" + good + "\njust a comment\n  bob:" + good + "  \n", users: 2},
		{name: "md5 apr1 refused", data: "alice:" + good + "\nbob:$apr1$abc$def\n", wantLine: 2, wantText: "only bcrypt digested passwords ($2y$, $2a$, $2b$) are supported for bob"},
		{name: "sha refused", data: "carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", wantLine: 1, wantText: "supported for carol"},
		{name: "empty user", data: ":" + good + "\n", wantLine: 1, wantText: "empty user name"},
		{name: "truncated bcrypt", data: "dave:$2y$05$short\n", wantLine: 1, wantText: "malformed bcrypt hash for dave"},
		{name: "duplicate user", data: "eve:" + good + "\neve:" + good + "\n", wantLine: 2, wantText: "eve appears a second time"},
		{name: "no user", data: "\n\n# nothing\n", wantText: "no user:bcrypt-hash line"},
		{name: "line too long", data: "frank:" + good + "\n" + strings.Repeat("x", 5000) + "\n", wantLine: 2, wantText: "line longer than 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ironicapi.ParseHTPasswd("/etc/ironic/htpasswd", []byte(tc.data))
			if tc.wantText == "" {
				if err != nil {
					t.Fatalf("ParseHTPasswd: %v", err)
				}
				if b.Users() != tc.users {
					t.Fatalf("Users() = %d, want %d", b.Users(), tc.users)
				}
				return
			}
			var he *ironicapi.HTPasswdError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want *HTPasswdError", err)
			}
			if he.Line != tc.wantLine || !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), "/etc/ironic/htpasswd") {
				t.Fatalf("err = %q (line %d), want line %d and %q", err, he.Line, tc.wantLine, tc.wantText)
			}
			if strings.Contains(err.Error(), good) {
				t.Fatalf("error %q holds the hash", err)
			}
		})
	}
}

func TestLoadHTPasswdBounds(t *testing.T) {
	dir := t.TempDir()
	if _, err := ironicapi.LoadHTPasswd(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: err = %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("\n", ironicapi.MaxHTPasswdBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ironicapi.LoadHTPasswd(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("big file: err = %v", err)
	}
	ok := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(ok, []byte(ironicFixture), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ironicapi.LoadHTPasswd(ok); err != nil || b.Users() != 1 {
		t.Fatalf("LoadHTPasswd = %v, %v", b, err)
	}
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestHTTPBasicAuthenticate(t *testing.T) {
	b, err := ironicapi.ParseHTPasswd("htpasswd", []byte(ironicFixture+"other:"+hashOf(t, "secret")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		headers []string
		status  int // 0: let through
		message string
	}{
		{name: "ironic's fixture credentials", headers: []string{"Basic bXlOYW1lOm15UGFzc3dvcmQ="}},
		{name: "second user", headers: []string{basic("other", "secret")}},
		{name: "lower-case type", headers: []string{"basic " + base64.StdEncoding.EncodeToString([]byte("other:secret"))}},
		{name: "password with a colon is wrong, not malformed", headers: []string{basic("other", "sec:ret")}, status: 401, message: "Incorrect username or password"},
		{name: "no header", status: 401, message: "Authorization required"},
		{name: "wrong password", headers: []string{basic("myName", "nope")}, status: 401, message: "Incorrect username or password"},
		{name: "unknown user", headers: []string{basic("nobody", "myPassword")}, status: 401, message: "Incorrect username or password"},
		{name: "bearer", headers: []string{"Bearer abc"}, status: 400, message: `Unsupported authorization type "Bearer"`},
		{name: "no token", headers: []string{"Basic"}, status: 400, message: "Could not parse Authorization header"},
		{name: "not base64", headers: []string{"Basic !!!"}, status: 400, message: "Could not decode authorization token"},
		{name: "no colon", headers: []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("myName"))}, status: 400, message: "Could not decode authorization token"},
		{name: "two headers", headers: []string{"Basic bXlOYW1lOm15UGFzc3dvcmQ=", "Basic bXlOYW1lOm15UGFzc3dvcmQ="}, status: 400, message: "Could not parse Authorization header"},
		{name: "oversized", headers: []string{"Basic " + strings.Repeat("A", 8192)}, status: 400, message: "Could not parse Authorization header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/nodes", nil)
			for _, h := range tc.headers {
				r.Header.Add("Authorization", h)
			}
			// Twice: the second check of good credentials comes from the
			// cache and must agree with the first.
			for range 2 {
				err := b.Authenticate(r)
				if tc.status == 0 {
					if err != nil {
						t.Fatalf("Authenticate: %v", err)
					}
					continue
				}
				var ae *ironicapi.Error
				if !errors.As(err, &ae) || ae.Status != tc.status || ae.Message != tc.message {
					t.Fatalf("Authenticate = %#v, want %d %q", err, tc.status, tc.message)
				}
			}
		})
	}
}

func TestNoAuthLetsEverythingThrough(t *testing.T) {
	if err := (ironicapi.NoAuth{}).Authenticate(httptest.NewRequest(http.MethodGet, "/v1/nodes", nil)); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPBasicThroughHandler serves the API with HTTPBasic and checks
// what a client sees: the public documents without credentials, a 401
// with WWW-Authenticate and Ironic's error body without them, and
// gophercloud's httpbasic client working with them.
func TestHTTPBasicThroughHandler(t *testing.T) {
	b, err := ironicapi.ParseHTPasswd("htpasswd", []byte(ironicFixture))
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t, func(_ *conductor.Options, ao *ironicapi.Options) { ao.Auth = b })
	for _, path := range []string{"/", "/v1/"} {
		resp, err := http.Get(l.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s without credentials: %s, want 200", path, resp.Status)
		}
	}
	resp, err := http.Get(l.srv.URL + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
		t.Fatalf("GET /v1/nodes without credentials: %s, WWW-Authenticate %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	var body struct {
		ErrorMessage string `json:"error_message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body.ErrorMessage, "Authorization required") {
		t.Fatalf("error body %q", body.ErrorMessage)
	}

	sc, err := httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{IronicEndpoint: l.srv.URL + "/v1/", IronicUser: "myName", IronicUserPassword: "myPassword"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.List(sc, nodes.ListOpts{}).AllPages(context.Background()); err != nil {
		t.Fatalf("gophercloud httpbasic list: %v", err)
	}
	bad, err := httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{IronicEndpoint: l.srv.URL + "/v1/", IronicUser: "myName", IronicUserPassword: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = nodes.List(bad, nodes.ListOpts{}).AllPages(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("gophercloud with a wrong password: %v, want a 401", err)
	}
}

// FuzzParseHTPasswd: any user file either loads at least one user or
// fails with an *HTPasswdError whose line is within the file, never
// echoing a hash; Authenticate on what loaded never panics.
func FuzzParseHTPasswd(f *testing.F) {
	f.Add([]byte(ironicFixture), "myName", "myPassword")
	f.Add([]byte("a:$2y$05$x\n:b\n"), "a", "b")
	f.Add([]byte("u:{SHA}abc\n"), "u", "")
	f.Fuzz(func(t *testing.T, data []byte, user, password string) {
		b, err := ironicapi.ParseHTPasswd("f", data)
		if err != nil {
			var he *ironicapi.HTPasswdError
			if !errors.As(err, &he) || he.Line < 0 || he.Line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("error %v (%T)", err, err)
			}
			return
		}
		if b.Users() == 0 {
			t.Fatal("loaded without a user")
		}
		r := httptest.NewRequest(http.MethodGet, "/v1/nodes", nil)
		r.Header.Set("Authorization", basic(user, password))
		_ = b.Authenticate(r)
	})
}

// TestProtect checks that a handler put behind the API's authentication
// is reached only with the API's credentials, and that a refusal is the
// API's own.
func TestProtect(t *testing.T) {
	b, err := ironicapi.ParseHTPasswd("htpasswd", []byte(ironicFixture))
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t, func(_ *conductor.Options, ao *ironicapi.Options) { ao.Auth = b })
	reached := 0
	srv := httptest.NewServer(l.api.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		_, _ = w.Write([]byte("inside"))
	})))
	defer srv.Close()
	for _, tc := range []struct {
		user, password string
		status         int
	}{{"", "", 401}, {"myName", "wrong", 401}, {"myName", "myPassword", 200}} {
		req, _ := http.NewRequest("GET", srv.URL+"/ui/", nil)
		if tc.user != "" {
			req.SetBasicAuth(tc.user, tc.password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%q/%q: %s %s, want %d", tc.user, tc.password, resp.Status, body, tc.status)
		}
		if tc.status == 401 && (resp.Header.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` || !strings.Contains(string(body), "error_message")) {
			t.Fatalf("refusal %s %q without the API's header or body", body, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if reached != 1 {
		t.Fatalf("the protected handler was reached %d times, want once", reached)
	}
}
