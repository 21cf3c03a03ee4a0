// Package ocitest runs a real container registry for tests (Debian's
// docker-registry, the CNCF distribution registry 2.8) on 127.0.0.1 with
// an ephemeral port and a temporary storage directory, optionally behind
// HTTP Basic (htpasswd) or token authentication with a token server of
// its own, and pushes blobs and manifests into it through the
// distribution API. The registry's access log tells what was fetched.
package ocitest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// Binary is the registry executable (Debian package docker-registry).
const Binary = "docker-registry"

// EnvRequire, set to 1, makes a test fail instead of skipping when the
// registry is missing (.ci/run sets it after installing the package).
const EnvRequire = "ANVIL_TEST_REGISTRY"

// Auth selects the registry's authentication.
type Auth int

const (
	// NoAuth: anonymous pulls and pushes.
	NoAuth Auth = iota
	// Basic: HTTP Basic against an htpasswd file (bcrypt).
	Basic
	// Token: Bearer tokens from a token server, as the distribution
	// specification's token authentication describes.
	Token
)

// Options configure Start.
type Options struct {
	Auth Auth
	// Username and Password are the one account (Basic and Token).
	Username, Password string
	// PreSharedToken, with Token, is a secret the token server also
	// accepts as the password of an empty user name (how Ironic sends an
	// image_pull_secret).
	PreSharedToken string
}

// Registry is a running docker-registry.
type Registry struct {
	// Host is 127.0.0.1:port, the reference's registry part.
	Host string
	// URL is http://Host.
	URL string
	// Tokens is the token server (nil unless Auth is Token).
	Tokens *TokenServer

	o       Options
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logPath string
	client  *http.Client
}

// Start starts a registry for the test; it is stopped (by PID) when the
// test ends. Without the docker-registry binary the test is skipped with
// one line, unless EnvRequire is 1.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s is not installed (Debian package docker-registry)", EnvRequire, Binary)
		}
		t.Skip(Binary + " not installed (Debian package docker-registry): registry test skipped")
	}
	dir := t.TempDir()
	r := &Registry{o: o, logPath: filepath.Join(dir, "registry.log"), done: make(chan struct{})}
	var authCfg string
	switch o.Auth {
	case Basic:
		h, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(o.Username+":"+string(h)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		authCfg = fmt.Sprintf("auth:\n  htpasswd:\n    realm: anvil-test\n    path: %s\n", pw)
	case Token:
		ts, err := newTokenServer(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ts.close)
		r.Tokens = ts
		authCfg = fmt.Sprintf("auth:\n  token:\n    realm: %s/token\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n",
			ts.URL, tokenService, tokenIssuer, ts.certPath)
	}
	// The port is chosen free just before the start; another process
	// may take it first, so a bind failure is tried again.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		r.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  headers:
    X-Content-Type-Options: [nosniff]
%s`, filepath.Join(dir, "storage"), r.Host, authCfg)
		cfgPath := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		err = r.start(bin, cfgPath)
		if err == nil {
			break
		}
		if attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
	r.URL = "http://" + r.Host
	t.Cleanup(r.stop)
	r.client = &http.Client{Timeout: 5 * time.Minute}
	return r
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the registry and waits until it answers /v2/ (or exits).
func (r *Registry) start(bin, cfg string) error {
	lf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(cfg)}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { // ends when the registry exits
		r.waitErr = cmd.Wait()
		lf.Close()
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b, _ := os.ReadFile(r.logPath)
			return fmt.Errorf("ocitest: %s exited: %v: %s", bin, r.waitErr, tail(string(b), 2000))
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			r.cmd, r.done = cmd, done
			return nil
		}
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("ocitest: %s did not answer within 30 s", bin)
}

func (r *Registry) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Log is the registry's log so far (its access log included).
func (r *Registry) Log() string {
	b, _ := os.ReadFile(r.logPath)
	return string(b)
}

// accessLine matches a Combined Log Format line: the request and its
// status.
var accessLine = regexp.MustCompile(`"(GET|HEAD|PUT|POST|PATCH|DELETE) (\S+) HTTP/[0-9.]+" (\d{3}) (\d+|-)`)

// Access is one request of the access log.
type Access struct {
	Method, Path string
	Status       int
	Bytes        int64
}

// Accesses is the access log, parsed.
func (r *Registry) Accesses() []Access {
	var out []Access
	sc := bufio.NewScanner(strings.NewReader(r.Log()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := accessLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		code, _ := strconv.Atoi(m[3])
		n, _ := strconv.ParseInt(m[4], 10, 64)
		out = append(out, Access{Method: m[1], Path: m[2], Status: code, Bytes: n})
	}
	return out
}

// BlobDownloads counts the successful GETs of repository's blob dgst in
// the access log, and the bytes sent for them.
func (r *Registry) BlobDownloads(repository, dgst string) (count int, bytes int64) {
	want := "/v2/" + repository + "/blobs/" + dgst
	for _, a := range r.Accesses() {
		if a.Method == http.MethodGet && a.Path == want && a.Status/100 == 2 {
			count++
			bytes += a.Bytes
		}
	}
	return count, bytes
}

// doer is the pushing client: anonymous, or the account's credentials
// answering the registry's challenge.
func (r *Registry) doer() *auth.Client {
	c := &auth.Client{Client: r.client, Cache: auth.NewCache()}
	if r.o.Auth != NoAuth {
		c.Credential = auth.StaticCredential(r.Host, auth.Credential{Username: r.o.Username, Password: r.o.Password})
	}
	return c
}

// Digest is the sha256 digest of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// PushBlob uploads content (size bytes) to repository in one PUT and
// returns nothing but an error: the caller knows the digest.
func (r *Registry) PushBlob(ctx context.Context, repository, dgst string, size int64, content io.Reader) error {
	c := r.doer()
	req, err := http.NewRequestWithContext(auth.AppendRepositoryScope(ctx, repoRef(r.Host, repository), auth.ActionPull, auth.ActionPush),
		http.MethodPost, r.URL+"/v2/"+repository+"/blobs/uploads/", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("ocitest: start upload: %s", resp.Status)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "http") {
		loc = r.URL + loc
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	req, err = http.NewRequestWithContext(auth.AppendRepositoryScope(ctx, repoRef(r.Host, repository), auth.ActionPull, auth.ActionPush),
		http.MethodPut, loc+sep+"digest="+dgst, content)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if seeker, ok := content.(io.ReadSeeker); ok {
		req.GetBody = func() (io.ReadCloser, error) {
			if _, err := seeker.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			return io.NopCloser(seeker), nil
		}
	}
	resp, err = c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("ocitest: upload %s: %s: %s", dgst, resp.Status, b)
	}
	return nil
}

// PushManifest puts a manifest (or index) of mediaType under reference
// (a tag or its digest) and returns its digest.
func (r *Registry) PushManifest(ctx context.Context, repository, reference, mediaType string, body []byte) (string, error) {
	c := r.doer()
	req, err := http.NewRequestWithContext(auth.AppendRepositoryScope(ctx, repoRef(r.Host, repository), auth.ActionPull, auth.ActionPush),
		http.MethodPut, r.URL+"/v2/"+repository+"/manifests/"+reference, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mediaType)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("ocitest: put manifest %s: %s: %s", reference, resp.Status, b)
	}
	return Digest(body), nil
}

// Descriptor is a content descriptor of a manifest.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is an index entry's platform.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// emptyConfig is the OCI empty descriptor's content.
var emptyConfig = []byte("{}")

// Layer is a disk image to push as a single-layer artifact.
type Layer struct {
	Content   []byte // or File
	File      string
	MediaType string // default application/octet-stream
	Title     string // org.opencontainers.image.title
}

// PushArtifact pushes a single-layer manifest holding layer (OCI's, or
// Docker's schema 2 when docker is set) and tags it with tag unless tag
// is empty; it returns the manifest's descriptor (media type, digest,
// size) and the layer's.
func (r *Registry) PushArtifact(ctx context.Context, repository, tag string, layer Layer, docker bool) (manifest, blob Descriptor, err error) {
	var (
		dgst string
		size int64
		rd   io.Reader
	)
	if layer.File != "" {
		f, err := os.Open(layer.File)
		if err != nil {
			return manifest, blob, err
		}
		defer f.Close()
		h := sha256.New()
		if size, err = io.Copy(h, f); err != nil {
			return manifest, blob, err
		}
		dgst = "sha256:" + hex.EncodeToString(h.Sum(nil))
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return manifest, blob, err
		}
		rd = f
	} else {
		dgst, size, rd = Digest(layer.Content), int64(len(layer.Content)), bytes.NewReader(layer.Content)
	}
	if err := r.PushBlob(ctx, repository, dgst, size, rd); err != nil {
		return manifest, blob, err
	}
	cfgType, mType := "application/vnd.oci.empty.v1+json", "application/vnd.oci.image.manifest.v1+json"
	if docker {
		cfgType, mType = "application/vnd.docker.container.image.v1+json", "application/vnd.docker.distribution.manifest.v2+json"
	}
	if err := r.PushBlob(ctx, repository, Digest(emptyConfig), int64(len(emptyConfig)), bytes.NewReader(emptyConfig)); err != nil {
		return manifest, blob, err
	}
	blob = Descriptor{MediaType: layer.MediaType, Digest: dgst, Size: size}
	if blob.MediaType == "" {
		blob.MediaType = "application/octet-stream"
	}
	if layer.Title != "" {
		blob.Annotations = map[string]string{"org.opencontainers.image.title": layer.Title}
	}
	m := map[string]any{"schemaVersion": 2, "mediaType": mType,
		"config": Descriptor{MediaType: cfgType, Digest: Digest(emptyConfig), Size: int64(len(emptyConfig))},
		"layers": []Descriptor{blob}}
	body, _ := json.Marshal(m)
	ref := tag
	if ref == "" {
		ref = Digest(body)
	}
	d, err := r.PushManifest(ctx, repository, ref, mType, body)
	return Descriptor{MediaType: mType, Digest: d, Size: int64(len(body))}, blob, err
}

// PushIndex pushes an OCI index (or a Docker manifest list) of entries
// under tag and returns its digest.
func (r *Registry) PushIndex(ctx context.Context, repository, tag string, entries []Descriptor, docker bool) (string, error) {
	mType := "application/vnd.oci.image.index.v1+json"
	if docker {
		mType = "application/vnd.docker.distribution.manifest.list.v2+json"
	}
	body, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mType, "manifests": entries})
	return r.PushManifest(ctx, repository, tag, mType, body)
}

func repoRef(host, repository string) registry.Reference {
	return registry.Reference{Registry: host, Repository: repository}
}

// The token server's identity in the registry's configuration.
const (
	tokenService = "anvil-test-registry"
	tokenIssuer  = "anvil-test-issuer"
)

// TokenServer issues the registry's Bearer tokens (ES256 JWTs signed by
// a key whose certificate is the registry's root bundle) to the account,
// or to the pre-shared token, for the scopes asked; it refuses anyone
// else.
type TokenServer struct {
	URL      string
	certPath string
	key      *ecdsa.PrivateKey
	certDER  []byte
	o        Options
	srv      *http.Server

	mu       sync.Mutex
	requests []TokenRequest
}

// TokenRequest is one request the token server answered.
type TokenRequest struct {
	User    string // "" for the pre-shared token or anonymous
	Granted bool
	Scope   string
}

// Requests returns the requests so far.
func (ts *TokenServer) Requests() []TokenRequest {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]TokenRequest(nil), ts.requests...)
}

func newTokenServer(dir string, o Options) (*TokenServer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: tokenIssuer},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ts := &TokenServer{key: key, certDER: der, o: o, certPath: filepath.Join(dir, "token-root.pem")}
	if err := os.WriteFile(ts.certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ts.URL = "http://" + ln.Addr().String()
	ts.srv = &http.Server{Handler: http.HandlerFunc(ts.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ts.srv.Serve(ln) }() // ends at close
	return ts, nil
}

func (ts *TokenServer) close() { _ = ts.srv.Close() }

func (ts *TokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/token" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	user, pass, hasAuth := r.BasicAuth()
	ok := hasAuth && ((user == ts.o.Username && pass == ts.o.Password && user != "") ||
		(user == "" && ts.o.PreSharedToken != "" && pass == ts.o.PreSharedToken))
	scopes := q["scope"]
	ts.mu.Lock()
	ts.requests = append(ts.requests, TokenRequest{User: user, Granted: ok, Scope: strings.Join(scopes, " ")})
	ts.mu.Unlock()
	if !ok || q.Get("service") != tokenService {
		w.Header().Set("WWW-Authenticate", `Basic realm="anvil-test-token"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
		return
	}
	var access []map[string]any
	for _, s := range scopes {
		parts := strings.Split(s, ":")
		if len(parts) != 3 || parts[0] != "repository" {
			continue
		}
		access = append(access, map[string]any{"type": "repository", "name": parts[1], "actions": strings.Split(parts[2], ",")})
	}
	tok, err := ts.sign(user, access)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_in": 300, "issued_at": time.Now().UTC().Format(time.RFC3339)})
}

var errNoKey = errors.New("ocitest: no signing key")
