// Package tempestlab runs OpenStack Ironic's own API test suite (Debian's
// ironic-tempest-plugin with tempest) against anvild. It holds the
// smallest Keystone token service tempest needs: tempest authenticates
// every client through Keystone v3 before it sends a request, and finds
// the baremetal endpoint in the token's service catalog. anvild itself
// runs with noauth and never looks at the token.
//
// The test (TestIronicTempestAPI) needs ANVIL_TEST_TEMPEST=1 and Debian's
// tempest and ironic-tempest-plugin packages; .ci/run installs them.
package tempestlab

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Account is a user the token service knows: a password, the roles it
// grants and its scope (a project name, or the system when System is set).
type Account struct {
	User     string
	Password string
	Project  string // project scope; empty with System
	System   bool   // system scope ("system": {"all": true})
	Roles    []string
}

// Endpoint is one service in the token's catalog.
type Endpoint struct {
	Type, Name, URL string
}

// Keystone is the token service: POST /v3/auth/tokens with the password
// method and a project or system scope answers 201 with X-Subject-Token
// and a token carrying the catalog; anything else is refused as Keystone
// refuses it (400 malformed, 401 wrong user or password or scope, 404
// unknown path, 405 method). Tokens it issued validate (GET, HEAD
// /v3/auth/tokens with X-Subject-Token) until they expire.
type Keystone struct {
	Accounts []Account
	Catalog  []Endpoint
	Region   string
	TTL      time.Duration // token lifetime; 0 is one hour
	Now      func() time.Time

	mu     sync.Mutex
	tokens map[string]issued
}

type issued struct {
	body    map[string]any
	expires time.Time
}

// maxTokenRequest bounds an authentication request's body.
const maxTokenRequest = 64 << 10

// maxTokens bounds the issued tokens kept for validation; the oldest
// expired ones go first, and past the bound new requests are refused.
const maxTokens = 10000

func (k *Keystone) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *Keystone) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/", "/v3", "/v3/":
		if r.Method != http.MethodGet {
			kError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"version": map[string]any{
			"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
			"links": []any{map[string]any{"rel": "self", "href": "http://" + r.Host + "/v3/"}},
		}})
	case "/v3/auth/tokens":
		switch r.Method {
		case http.MethodPost:
			k.issue(w, r)
		case http.MethodGet, http.MethodHead:
			k.validate(w, r)
		default:
			kError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		}
	default:
		kError(w, http.StatusNotFound, "The resource could not be found.")
	}
}

type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password struct {
				User struct {
					Name     string `json:"name"`
					Password string `json:"password"`
				} `json:"user"`
			} `json:"password"`
		} `json:"identity"`
		Scope *struct {
			Project *struct {
				Name string `json:"name"`
			} `json:"project"`
			System *struct {
				All bool `json:"all"`
			} `json:"system"`
		} `json:"scope"`
	} `json:"auth"`
}

func (k *Keystone) issue(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxTokenRequest+1))
	if err != nil || len(data) > maxTokenRequest {
		kError(w, http.StatusBadRequest, fmt.Sprintf("request body over %d bytes or unreadable", maxTokenRequest))
		return
	}
	var req authRequest
	if err := json.Unmarshal(data, &req); err != nil {
		kError(w, http.StatusBadRequest, "malformed authentication request: "+err.Error())
		return
	}
	id := req.Auth.Identity
	if len(id.Methods) != 1 || id.Methods[0] != "password" || id.Password.User.Name == "" {
		kError(w, http.StatusBadRequest, "only the password method with a user name is supported")
		return
	}
	acct := k.find(id.Password.User.Name, id.Password.User.Password)
	if acct == nil {
		kError(w, http.StatusUnauthorized, "The request you have made requires authentication.")
		return
	}
	sc := req.Auth.Scope
	switch {
	case sc == nil:
		kError(w, http.StatusUnauthorized, "an unscoped token is not offered")
		return
	case sc.System != nil:
		if !acct.System || !sc.System.All {
			kError(w, http.StatusUnauthorized, "user "+acct.User+" has no role on the system")
			return
		}
	case sc.Project != nil:
		if acct.Project == "" || sc.Project.Name != acct.Project {
			kError(w, http.StatusUnauthorized, "user "+acct.User+" has no role on project "+sc.Project.Name)
			return
		}
	default:
		kError(w, http.StatusBadRequest, "scope names neither a project nor the system")
		return
	}
	now := k.now().UTC()
	ttl := k.TTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	exp := now.Add(ttl)
	roles := make([]any, 0, len(acct.Roles))
	for _, role := range acct.Roles {
		roles = append(roles, map[string]any{"id": "role-" + role, "name": role})
	}
	domain := map[string]any{"id": "default", "name": "Default"}
	token := map[string]any{
		"methods":    []any{"password"},
		"issued_at":  now.Format("2006-01-02T15:04:05.000000Z"),
		"expires_at": exp.Format("2006-01-02T15:04:05.000000Z"),
		"user":       map[string]any{"id": "user-" + acct.User, "name": acct.User, "domain": domain},
		"roles":      roles,
		"catalog":    k.catalog(),
	}
	if acct.System {
		token["system"] = map[string]any{"all": true}
	} else {
		token["project"] = map[string]any{"id": "project-" + acct.Project, "name": acct.Project, "domain": domain}
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	tok := hex.EncodeToString(raw[:])
	k.mu.Lock()
	if k.tokens == nil {
		k.tokens = map[string]issued{}
	}
	if len(k.tokens) >= maxTokens {
		for t, is := range k.tokens {
			if !is.expires.After(now) {
				delete(k.tokens, t)
			}
		}
	}
	full := len(k.tokens) >= maxTokens
	if !full {
		k.tokens[tok] = issued{body: token, expires: exp}
	}
	k.mu.Unlock()
	if full {
		kError(w, http.StatusServiceUnavailable, fmt.Sprintf("more than %d live tokens", maxTokens))
		return
	}
	w.Header().Set("X-Subject-Token", tok)
	writeJSON(w, http.StatusCreated, map[string]any{"token": token})
}

func (k *Keystone) validate(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("X-Subject-Token")
	k.mu.Lock()
	is, ok := k.tokens[tok]
	k.mu.Unlock()
	if !ok || !is.expires.After(k.now()) {
		kError(w, http.StatusNotFound, "Could not find token: "+tok)
		return
	}
	w.Header().Set("X-Subject-Token", tok)
	writeJSON(w, http.StatusOK, map[string]any{"token": is.body})
}

func (k *Keystone) find(user, password string) *Account {
	for i := range k.Accounts {
		a := &k.Accounts[i]
		if a.User == user && subtle.ConstantTimeCompare([]byte(a.Password), []byte(password)) == 1 {
			return a
		}
	}
	return nil
}

func (k *Keystone) catalog() []any {
	out := make([]any, 0, len(k.Catalog))
	for i, e := range k.Catalog {
		var eps []any
		for _, iface := range []string{"public", "internal", "admin"} {
			eps = append(eps, map[string]any{
				"id": fmt.Sprintf("ep-%d-%s", i, iface), "interface": iface,
				"region": k.Region, "region_id": k.Region, "url": e.URL,
			})
		}
		out = append(out, map[string]any{"id": fmt.Sprintf("svc-%d", i), "type": e.Type, "name": e.Name, "endpoints": eps})
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// kError answers with Keystone's error body.
func kError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": status, "message": msg, "title": http.StatusText(status),
	}})
}
