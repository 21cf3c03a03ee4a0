package ironicapi

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Bounds of HTTP basic authentication.
const (
	// MaxHTPasswdBytes bounds the user file LoadHTPasswd reads.
	MaxHTPasswdBytes = 1 << 20
	// maxAuthHeaderBytes bounds the Authorization header HTTPBasic
	// decodes; a longer one is a 400 without decoding it.
	maxAuthHeaderBytes = 4096
	// maxHTPasswdLine bounds one line of the user file.
	maxHTPasswdLine = 4096
	// authCacheSize bounds the cache of verified credentials, as Ironic's
	// lru_cache(maxsize=256) around bcrypt.checkpw.
	authCacheSize = 256
)

// NoAuth is Ironic's auth_strategy=noauth: every request is let through.
// It is what a nil Options.Auth means; it exists to be named in
// configuration code.
type NoAuth struct{}

// Authenticate lets every request through.
func (NoAuth) Authenticate(*http.Request) error { return nil }

// HTTPBasic is Ironic's auth_strategy=http_basic: requests carry
// "Authorization: Basic base64(user:password)" checked against an
// Apache-style user file of "user:bcrypt-hash" lines
// ([DEFAULT]http_basic_auth_user_file). Only bcrypt digests ($2y$, $2a$,
// $2b$) are accepted, as in Ironic. Successful checks are cached (at most
// 256 entries) so a client's repeated requests do not each pay bcrypt's
// cost; the cache key is a SHA-256 of the credentials, never the password.
//
// The file is read once, by LoadHTPasswd; a changed file takes effect
// when the server loads it again (a restart), where Ironic re-reads it on
// every request.
type HTTPBasic struct {
	users map[string][]byte

	mu    sync.Mutex
	cache map[[sha256.Size]byte]struct{}
	order [][sha256.Size]byte
}

// HTPasswdError is a malformed user file: the file, the 1-based line and
// what was wrong with it. It never holds a password hash.
type HTPasswdError struct {
	Path   string
	Line   int
	Reason string
}

func (e *HTPasswdError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("ironicapi: http_basic_auth_user_file %s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("ironicapi: http_basic_auth_user_file %s line %d: %s", e.Path, e.Line, e.Reason)
}

// LoadHTPasswd reads the user file at path. Blank lines are skipped, as
// are lines without a colon (Ironic ignores them too); every other line
// must be "user:hash" with a non-empty user and a bcrypt hash, and a user
// may appear once. A file larger than MaxHTPasswdBytes, a line longer than
// 4096 bytes, or a file with no user is an *HTPasswdError.
func LoadHTPasswd(path string) (*HTTPBasic, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &HTPasswdError{Path: path, Reason: err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxHTPasswdBytes+1))
	if err != nil {
		return nil, &HTPasswdError{Path: path, Reason: err.Error()}
	}
	if len(data) > MaxHTPasswdBytes {
		return nil, &HTPasswdError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", MaxHTPasswdBytes)}
	}
	return ParseHTPasswd(path, data)
}

// ParseHTPasswd is LoadHTPasswd on the contents of a file; name is used in
// errors.
func ParseHTPasswd(name string, data []byte) (*HTTPBasic, error) {
	b := &HTTPBasic{users: map[string][]byte{}, cache: map[[sha256.Size]byte]struct{}{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 512), maxHTPasswdLine)
	line := 0
	for sc.Scan() {
		line++
		entry := strings.TrimSpace(sc.Text())
		if entry == "" || !strings.Contains(entry, ":") {
			continue
		}
		user, hash, _ := strings.Cut(entry, ":")
		switch {
		case user == "":
			return nil, &HTPasswdError{Path: name, Line: line, Reason: "empty user name before the colon"}
		case !isBcrypt(hash):
			return nil, &HTPasswdError{Path: name, Line: line, Reason: fmt.Sprintf("only bcrypt digested passwords ($2y$, $2a$, $2b$) are supported for %s", user)}
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, &HTPasswdError{Path: name, Line: line, Reason: fmt.Sprintf("malformed bcrypt hash for %s", user)}
		}
		if _, dup := b.users[user]; dup {
			return nil, &HTPasswdError{Path: name, Line: line, Reason: fmt.Sprintf("user %s appears a second time", user)}
		}
		b.users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &HTPasswdError{Path: name, Line: line + 1, Reason: fmt.Sprintf("line longer than %d bytes", maxHTPasswdLine)}
		}
		return nil, &HTPasswdError{Path: name, Reason: err.Error()}
	}
	if len(b.users) == 0 {
		return nil, &HTPasswdError{Path: name, Reason: "no user:bcrypt-hash line"}
	}
	return b, nil
}

func isBcrypt(hash string) bool {
	if len(hash) < 4 {
		return false
	}
	switch hash[:4] {
	case "$2y$", "$2a$", "$2b$":
		return true
	}
	return false
}

// Users returns how many users the file holds.
func (b *HTTPBasic) Users() int { return len(b.users) }

// Authenticate checks the request's Basic credentials. As Ironic: no
// Authorization header is a 401 "Authorization required"; a header that
// is not "<type> <token>", a type other than Basic, or a token that is not
// base64 of "user:password" is a 400; an unknown user or a wrong password
// is a 401 "Incorrect username or password". The handler adds
// WWW-Authenticate: Basic realm="Baremetal API" to every 401.
func (b *HTTPBasic) Authenticate(r *http.Request) error {
	vals := r.Header.Values("Authorization")
	if len(vals) == 0 {
		return Errorf(http.StatusUnauthorized, "Authorization required")
	}
	hdr := strings.TrimSpace(vals[0])
	if len(vals) > 1 || len(hdr) > maxAuthHeaderBytes {
		return badRequest("Could not parse Authorization header")
	}
	typ, token, ok := strings.Cut(hdr, " ")
	token = strings.TrimSpace(token)
	if !ok || token == "" || strings.ContainsAny(token, " \t") {
		return badRequest("Could not parse Authorization header")
	}
	if !strings.EqualFold(typ, "basic") {
		return badRequest("Unsupported authorization type %q", typ)
	}
	pair, err := base64.StdEncoding.Strict().DecodeString(token)
	if err != nil {
		return badRequest("Could not decode authorization token")
	}
	user, password, ok := bytes.Cut(pair, []byte(":"))
	if !ok {
		return badRequest("Could not decode authorization token")
	}
	hash, known := b.users[string(user)]
	if !known {
		return Errorf(http.StatusUnauthorized, "Incorrect username or password")
	}
	key := cacheKey(user, password, hash)
	if b.cached(key) {
		return nil
	}
	if bcrypt.CompareHashAndPassword(hash, password) != nil {
		return Errorf(http.StatusUnauthorized, "Incorrect username or password")
	}
	b.remember(key)
	return nil
}

func cacheKey(user, password, hash []byte) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range [][]byte{user, password, hash} {
		// Length-prefixed so that no two triples share an encoding.
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	var k [sha256.Size]byte
	copy(k[:], h.Sum(nil))
	return k
}

func (b *HTTPBasic) cached(k [sha256.Size]byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.cache[k]
	return ok
}

// remember records a verified key, evicting the oldest beyond
// authCacheSize.
func (b *HTTPBasic) remember(k [sha256.Size]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.cache[k]; ok {
		return
	}
	if len(b.order) >= authCacheSize {
		delete(b.cache, b.order[0])
		b.order = b.order[1:]
	}
	b.cache[k] = struct{}{}
	b.order = append(b.order, k)
}

var (
	_ Authenticator = NoAuth{}
	_ Authenticator = (*HTTPBasic)(nil)
)
