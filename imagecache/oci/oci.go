package oci

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// The manifest media types a Resolver accepts: OCI's and Docker's
// (schema 2), each as a single manifest or a list of them.
const (
	MediaTypeOCIManifest        = ocispec.MediaTypeImageManifest
	MediaTypeOCIIndex           = ocispec.MediaTypeImageIndex
	MediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	MediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// manifestTypes is the Accept list of manifest requests.
var manifestTypes = []string{MediaTypeOCIIndex, MediaTypeOCIManifest, MediaTypeDockerManifestList, MediaTypeDockerManifest}

// DiskTypeAnnotation is the annotation of an index entry that names its
// disk image format (raw, qcow2, qemu, applehv), as podman and ORAS
// clients set it and Ironic selects by it.
const DiskTypeAnnotation = "disktype"

// TitleAnnotation names a layer's original file.
const TitleAnnotation = ocispec.AnnotationTitle

// Limits of a Resolver.
const (
	// DefaultMaxManifestBytes bounds one manifest or index.
	DefaultMaxManifestBytes = 4 << 20
	// DefaultRequestTimeout bounds one request's headers (Ironic's
	// webserver_connection_timeout is 60 s).
	DefaultRequestTimeout = 60 * time.Second
	maxAuthConfigBytes    = 1 << 20
)

// Errors a caller branches on; every error of Resolve wraps one of them
// inside an *Error, or a context error.
var (
	// ErrInvalidReference: the image_source is not an oci:// reference
	// Anvil can use.
	ErrInvalidReference = errors.New("invalid OCI image reference")
	// ErrNotFound: the registry has no such repository, tag or digest.
	ErrNotFound = errors.New("image not found in the registry")
	// ErrAuthentication: the registry refused the request for want of
	// (valid) credentials.
	ErrAuthentication = errors.New("registry authentication failed")
	// ErrNoDiskImage: the manifest or index holds no disk image Anvil can
	// deploy (no entry for the node's architecture with a disktype
	// annotation, or a manifest with more than one layer: a container).
	ErrNoDiskImage = errors.New("no deployable disk image in the OCI artifact")
	// ErrInsecureTransport: the registry does not speak HTTPS and
	// falling back to HTTP is not permitted.
	ErrInsecureTransport = errors.New("registry not reachable over HTTPS")
	// ErrRegistry: any other failure talking to the registry (a server
	// error, a malformed manifest, a network error).
	ErrRegistry = errors.New("registry request failed")
)

// Error is a failure of an OCI resolution: the reference, what was
// being done and why. Err wraps one of the sentinels above.
type Error struct {
	Ref string
	Op  string
	Err error
}

func (e *Error) Error() string { return "oci: " + e.Op + " " + e.Ref + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Reference is a parsed oci:// image reference:
// oci://registry[:port]/repository[:tag][@algorithm:hex].
type Reference struct {
	Registry   string // host[:port]
	Repository string
	Tag        string // "latest" when neither a tag nor a digest is given
	Digest     string // "" unless pinned
}

// String is the reference as oci://registry/repository[:tag][@digest].
func (r Reference) String() string {
	s := "oci://" + r.Registry + "/" + r.Repository
	if r.Tag != "" && (r.Digest == "" || r.Tag != "latest") {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// IsOCI reports whether src is an oci:// reference (what Ironic's
// is_container_registry_url checks).
func IsOCI(src string) bool { return strings.HasPrefix(src, "oci://") }

// ParseReference parses an oci:// reference. A digest must be sha256
// (64 hex digits) or sha512 (128), as Ironic accepts.
func ParseReference(s string) (Reference, error) {
	bad := func(why string) (Reference, error) {
		return Reference{}, &Error{Ref: s, Op: "parse", Err: fmt.Errorf("%w: %s", ErrInvalidReference, why)}
	}
	rest, ok := strings.CutPrefix(s, "oci://")
	if !ok {
		return bad("want oci://registry/repository[:tag|@sha256:digest]")
	}
	host, path, ok := strings.Cut(rest, "/")
	if !ok || host == "" || path == "" {
		return bad("want a registry host and a repository path")
	}
	if strings.ContainsAny(host, "@?#") {
		return bad("the registry host " + host + " is not a host[:port]")
	}
	var r Reference
	r.Registry = host
	if before, digest, found := strings.Cut(path, "@"); found {
		path = before
		algo, hexv, ok := strings.Cut(digest, ":")
		want := map[string]int{"sha256": 64, "sha512": 128}[algo]
		if !ok || want == 0 {
			return bad("the digest " + digest + " is not sha256:<hex> or sha512:<hex>")
		}
		if len(hexv) != want {
			return bad(fmt.Sprintf("the %s digest has %d hex digits, want %d", algo, len(hexv), want))
		}
		if _, err := hex.DecodeString(hexv); err != nil || strings.ToLower(hexv) != hexv {
			return bad("the digest " + digest + " is not lower-case hex")
		}
		r.Digest = digest
	}
	if i := strings.LastIndexByte(path, ':'); i >= 0 {
		r.Tag = path[i+1:]
		path = path[:i]
		if r.Tag == "" {
			return bad("an empty tag")
		}
	}
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	r.Repository = path
	if r.Repository == "" || strings.HasPrefix(r.Repository, "/") || strings.HasSuffix(r.Repository, "/") || strings.Contains(r.Repository, "//") {
		return bad("the repository " + r.Repository + " is not a path of names")
	}
	// The registry's own grammar (lower case names, tag characters).
	probe := host + "/" + r.Repository
	if r.Digest != "" {
		probe += "@" + r.Digest
	} else {
		probe += ":" + r.Tag
	}
	if _, err := remote.NewRepository(probe); err != nil {
		return bad(err.Error())
	}
	return r, nil
}

// Options configure a Resolver with Ironic's [oci] options.
type Options struct {
	// HTTPClient makes the requests (its Transport's TLS settings are
	// [oci]verify_ca's); nil is a client with DefaultRequestTimeout on
	// response headers.
	HTTPClient *http.Client
	// PermitHTTPFallback is [oci]permit_fallback_to_http_transport:
	// when the registry cannot be reached over HTTPS, HTTP is tried.
	// Off, only HTTPS is used.
	PermitHTTPFallback bool
	// AuthenticationConfig is [oci]authentication_config: a JSON file
	// {"auths": {"<registry host>": {"auth": "<secret>"}}} of
	// pre-shared secrets, read at each resolution (so it can be
	// rotated). A node's image_pull_secret is preferred.
	AuthenticationConfig string
	// MaxManifestBytes bounds a manifest or index
	// (DefaultMaxManifestBytes).
	MaxManifestBytes int64
}

// Resolver resolves oci:// references to the one blob that is a
// node's disk image. It keeps no state between calls and is safe for
// concurrent use.
type Resolver struct {
	o Options
}

// NewResolver returns a Resolver.
func NewResolver(o Options) *Resolver {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: DefaultRequestTimeout,
			TLSHandshakeTimeout: 10 * time.Second, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		}}
	}
	if o.MaxManifestBytes <= 0 {
		o.MaxManifestBytes = DefaultMaxManifestBytes
	}
	return &Resolver{o: o}
}

// Request is what to resolve, for which node.
type Request struct {
	// Ref is the oci:// image_source.
	Ref string
	// CPUArch is the node's properties.cpu_arch; "" matches any. x86_64
	// and amd64 match each other, as aarch64 and arm64 do.
	CPUArch string
	// DownloadSource is the node's image_download_source: "local"
	// prefers qcow2 artifacts (the conductor converts them), anything
	// else raw ones (Ironic's preference order).
	DownloadSource string
	// PullSecret is the node's image_pull_secret (instance_info, else
	// driver_info); "" uses the configured secrets, or none.
	PullSecret string
}

// Artifact is a resolved disk image: one blob of a registry.
type Artifact struct {
	Ref            Reference
	ManifestDigest string // the single-layer manifest holding the blob
	// Digest, Size and MediaType are the blob's, from the manifest; the
	// digest is the image's checksum.
	Digest    string
	Size      int64
	MediaType string
	// DiskFormat is the index entry's disktype: raw or qcow2 (applehv is
	// raw, qemu is qcow2), or "unknown" for a manifest named directly.
	DiskFormat string
	// Compression is "gzip" or "zstd" when the blob's media type says it
	// is compressed, else "".
	Compression string
	// Filename is the layer's org.opencontainers.image.title, if any.
	Filename string
	// PlainHTTP: the registry was reached over HTTP (fallback).
	PlainHTTP bool
	// Authenticated: the registry required credentials.
	Authenticated bool
	// BlobURL is where the blob is (https://registry/v2/<repo>/blobs/<digest>).
	BlobURL string

	repo *remote.Repository
}

// Checksum is the blob digest's algorithm and hex value.
func (a *Artifact) Checksum() (algo, value string) {
	algo, value, _ = strings.Cut(a.Digest, ":")
	return algo, value
}

// Open streams the blob. The caller verifies it against Digest and Size
// (NewVerifier) and bounds how long it reads.
func (a *Artifact) Open(ctx context.Context) (io.ReadCloser, error) {
	rc, err := a.repo.Blobs().Fetch(ctx, ocispec.Descriptor{MediaType: a.MediaType, Digest: digestOf(a.Digest), Size: a.Size})
	if err != nil {
		err = classify(a.Ref.String(), "fetch blob "+a.Digest, err)
		var te *transportError
		if errors.As(err, &te) {
			err = &Error{Ref: a.Ref.String(), Op: "fetch blob " + a.Digest, Err: fmt.Errorf("%w: %v", ErrRegistry, te.err)}
		}
		return nil, err
	}
	return rc, nil
}

func digestOf(s string) digest.Digest { return digest.Digest(s) }

// Resolve finds the disk image req.Ref names: the manifest the tag or
// digest points to; when it is an index (or a Docker manifest list),
// the entries whose disktype annotation is a disk format, in Ironic's
// order of preference for the download source, whose platform
// architecture matches the node's, the first whose manifest has exactly
// one layer. A single manifest must have exactly one layer. Over HTTPS,
// or HTTP when permitted and HTTPS fails; anonymously, or with the
// node's pull secret or the configured one when the registry asks (Basic
// or Bearer token authentication as the distribution specification
// describes).
func (r *Resolver) Resolve(ctx context.Context, req Request) (*Artifact, error) {
	ref, err := ParseReference(req.Ref)
	if err != nil {
		return nil, err
	}
	if req.DownloadSource == "swift" {
		return nil, &Error{Ref: req.Ref, Op: "resolve", Err: fmt.Errorf("%w: an image_download_source of swift is incompatible with an OCI registry", ErrInvalidReference)}
	}
	a, err := r.resolve(ctx, ref, req, false)
	var te *transportError
	if errors.As(err, &te) {
		if !r.o.PermitHTTPFallback {
			return nil, &Error{Ref: req.Ref, Op: "resolve", Err: fmt.Errorf("%w (%v); HTTP is used only with [oci]permit_fallback_to_http_transport", ErrInsecureTransport, te.err)}
		}
		a, err = r.resolve(ctx, ref, req, true)
		if errors.As(err, &te) {
			return nil, &Error{Ref: req.Ref, Op: "resolve", Err: fmt.Errorf("%w: %v", ErrRegistry, te.err)}
		}
	}
	return a, err
}

// transportError marks a failure to talk HTTPS at all (connection,
// TLS), which the HTTP fallback may cure.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }

func (r *Resolver) repository(ref Reference, secret string, plain bool, authed *bool) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, err
	}
	repo.PlainHTTP = plain
	repo.ManifestMediaTypes = manifestTypes
	repo.MaxMetadataBytes = r.o.MaxManifestBytes
	repo.SkipReferrersGC = true
	repo.Client = &auth.Client{
		Client: r.o.HTTPClient,
		Cache:  auth.NewCache(),
		Credential: func(ctx context.Context, host string) (auth.Credential, error) {
			*authed = true
			s := secret
			if s == "" {
				s = r.configSecret(host)
			}
			return credential(s), nil
		},
	}
	return repo, nil
}

// credential maps a pull secret to a credential: a base64 "user:password"
// (the auth value of a container config.json) is that user; anything
// else is a pre-shared token sent with an empty user name, as Ironic
// sends image_pull_secret.
func credential(secret string) auth.Credential {
	if secret == "" {
		return auth.EmptyCredential
	}
	if b, err := base64.StdEncoding.DecodeString(secret); err == nil {
		if u, p, ok := strings.Cut(string(b), ":"); ok && u != "" && p != "" {
			return auth.Credential{Username: u, Password: p}
		}
	}
	return auth.Credential{Password: secret}
}

// configSecret is the [oci]authentication_config secret for host, or "".
// The file is read on each use; a missing or malformed one gives none.
func (r *Resolver) configSecret(host string) string {
	if r.o.AuthenticationConfig == "" {
		return ""
	}
	f, err := os.Open(r.o.AuthenticationConfig)
	if err != nil {
		return ""
	}
	defer f.Close()
	var cfg struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxAuthConfigBytes)).Decode(&cfg); err != nil {
		return ""
	}
	return cfg.Auths[host].Auth
}

// diskPriority is Ironic's order of disk formats: local downloads prefer
// qcow2 (converted by the conductor), others raw.
func diskPriority(source string) map[string]int {
	if source == "local" {
		return map[string]int{"qcow2": 1, "qemu": 2, "raw": 3, "applehv": 4}
	}
	return map[string]int{"raw": 1, "applehv": 2, "qcow2": 3, "qemu": 4}
}

// archAliases are the architecture names that match cpu_arch.
func archAliases(cpu string) []string {
	switch cpu {
	case "x86_64", "amd64":
		return []string{"x86_64", "amd64"}
	case "aarch64", "arm64":
		return []string{"aarch64", "arm64"}
	}
	return []string{cpu}
}

// manifest is the union of the OCI and Docker manifest and index shapes.
type manifest struct {
	MediaType string               `json:"mediaType"`
	Manifests []ocispec.Descriptor `json:"manifests"`
	Layers    []ocispec.Descriptor `json:"layers"`
}

func (r *Resolver) resolve(ctx context.Context, ref Reference, req Request, plain bool) (*Artifact, error) {
	authed := false
	repo, err := r.repository(ref, req.PullSecret, plain, &authed)
	if err != nil {
		return nil, &Error{Ref: req.Ref, Op: "resolve", Err: fmt.Errorf("%w: %v", ErrInvalidReference, err)}
	}
	name := ref.Tag
	if ref.Digest != "" {
		name = ref.Digest
	}
	desc, body, err := r.fetchManifest(ctx, repo, ref, name, nil)
	if err != nil {
		return nil, err
	}
	if ref.Digest != "" && desc.Digest.String() != ref.Digest {
		return nil, &Error{Ref: req.Ref, Op: "verify manifest", Err: fmt.Errorf("%w: the manifest's digest is %s", ErrRegistry, desc.Digest)}
	}
	var m manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &Error{Ref: req.Ref, Op: "decode manifest", Err: fmt.Errorf("%w: %v", ErrRegistry, err)}
	}
	a := &Artifact{Ref: ref, PlainHTTP: plain, repo: repo, DiskFormat: "unknown", ManifestDigest: desc.Digest.String()}
	switch desc.MediaType {
	case MediaTypeOCIIndex, MediaTypeDockerManifestList:
		if err := r.pick(ctx, repo, ref, req, m.Manifests, a); err != nil {
			return nil, err
		}
	case MediaTypeOCIManifest, MediaTypeDockerManifest:
		if len(m.Layers) != 1 {
			return nil, &Error{Ref: req.Ref, Op: "resolve", Err: fmt.Errorf("%w: the manifest has %d layers, want 1 (a container image is not a disk image)", ErrNoDiskImage, len(m.Layers))}
		}
		a.setLayer(m.Layers[0])
	default:
		return nil, &Error{Ref: req.Ref, Op: "resolve", Err: fmt.Errorf("%w: media type %q is not a manifest or an index", ErrNoDiskImage, desc.MediaType)}
	}
	a.Authenticated = authed
	scheme := "https"
	if plain {
		scheme = "http"
	}
	a.BlobURL = scheme + "://" + ref.Registry + "/v2/" + ref.Repository + "/blobs/" + a.Digest
	return a, nil
}

func (a *Artifact) setLayer(l ocispec.Descriptor) {
	a.Digest, a.Size, a.MediaType = l.Digest.String(), l.Size, l.MediaType
	a.Filename = l.Annotations[TitleAnnotation]
	switch {
	case strings.HasSuffix(l.MediaType, "zstd"):
		a.Compression = "zstd"
	case strings.HasSuffix(l.MediaType, "gzip"):
		a.Compression = "gzip"
	}
}

// pick chooses the index entry (see Resolve) and fills a from it.
func (r *Resolver) pick(ctx context.Context, repo *remote.Repository, ref Reference, req Request, entries []ocispec.Descriptor, a *Artifact) error {
	prio := diskPriority(req.DownloadSource)
	type cand struct {
		d    ocispec.Descriptor
		prio int
		i    int
	}
	var cands []cand
	for i, e := range entries {
		dt := e.Annotations[DiskTypeAnnotation]
		p, ok := prio[dt]
		if !ok {
			continue // no disk type: a container, or something Ironic skips
		}
		if req.CPUArch != "" && e.Platform != nil && e.Platform.Architecture != "" && !slices.Contains(archAliases(req.CPUArch), e.Platform.Architecture) {
			continue
		}
		cands = append(cands, cand{e, p, i})
	}
	slices.SortStableFunc(cands, func(x, y cand) int { return x.prio - y.prio })
	for _, c := range cands {
		_, body, err := r.fetchManifest(ctx, repo, ref, c.d.Digest.String(), &c.d)
		if err != nil {
			return err
		}
		var m manifest
		if err := json.Unmarshal(body, &m); err != nil {
			return &Error{Ref: ref.String(), Op: "decode manifest " + c.d.Digest.String(), Err: fmt.Errorf("%w: %v", ErrRegistry, err)}
		}
		if len(m.Layers) != 1 {
			continue // a container image
		}
		a.setLayer(m.Layers[0])
		a.ManifestDigest = c.d.Digest.String()
		switch dt := c.d.Annotations[DiskTypeAnnotation]; dt {
		case "raw", "applehv":
			a.DiskFormat = "raw"
		default:
			a.DiskFormat = "qcow2"
		}
		return nil
	}
	arch := req.CPUArch
	if arch == "" {
		arch = "any"
	}
	return &Error{Ref: ref.String(), Op: "resolve", Err: fmt.Errorf("%w: of %d index entries none has a %q annotation (raw, qcow2, qemu, applehv), architecture %s and a single layer",
		ErrNoDiskImage, len(entries), DiskTypeAnnotation, arch)}
}

// fetchManifest fetches a manifest by tag or digest (verified against
// desc when given), bounded in size.
func (r *Resolver) fetchManifest(ctx context.Context, repo *remote.Repository, ref Reference, name string, desc *ocispec.Descriptor) (ocispec.Descriptor, []byte, error) {
	var (
		d   ocispec.Descriptor
		rc  io.ReadCloser
		err error
	)
	if desc != nil {
		if desc.Size > r.o.MaxManifestBytes {
			return d, nil, &Error{Ref: ref.String(), Op: "fetch manifest " + name, Err: fmt.Errorf("%w: %d bytes, more than %d", ErrRegistry, desc.Size, r.o.MaxManifestBytes)}
		}
		d = *desc
		rc, err = repo.Manifests().Fetch(ctx, d)
	} else {
		d, rc, err = repo.FetchReference(ctx, name)
	}
	if err != nil {
		return d, nil, classify(ref.String(), "fetch manifest "+name, err)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, r.o.MaxManifestBytes+1))
	if err != nil {
		return d, nil, classify(ref.String(), "fetch manifest "+name, err)
	}
	if int64(len(body)) > r.o.MaxManifestBytes {
		return d, nil, &Error{Ref: ref.String(), Op: "fetch manifest " + name, Err: fmt.Errorf("%w: more than %d bytes", ErrRegistry, r.o.MaxManifestBytes)}
	}
	// The digest is of the bytes as served (a tag's too).
	sum := sha256.Sum256(body)
	got := "sha256:" + hex.EncodeToString(sum[:])
	if strings.HasPrefix(d.Digest.String(), "sha512:") {
		s := sha512.Sum512(body)
		got = "sha512:" + hex.EncodeToString(s[:])
	}
	if d.Digest != "" && d.Digest.String() != got {
		return d, nil, &Error{Ref: ref.String(), Op: "verify manifest " + name, Err: fmt.Errorf("%w: content digest %s, registry said %s", ErrRegistry, got, d.Digest)}
	}
	d.Digest = digestOf(got)
	d.Size = int64(len(body))
	return d, body, nil
}

// classify wraps a registry client error in an *Error with a sentinel;
// a failure to connect at all is a *transportError.
func classify(ref, op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Ref: ref, Op: op, Err: err}
	}
	var er *errcode.ErrorResponse
	if errors.As(err, &er) {
		switch er.StatusCode {
		case http.StatusUnauthorized:
			return &Error{Ref: ref, Op: op, Err: fmt.Errorf("%w: %v", ErrAuthentication, err)}
		case http.StatusForbidden, http.StatusNotFound:
			return &Error{Ref: ref, Op: op, Err: fmt.Errorf("%w: %v", ErrNotFound, err)}
		}
		return &Error{Ref: ref, Op: op, Err: fmt.Errorf("%w: %v", ErrRegistry, err)}
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return &Error{Ref: ref, Op: op, Err: fmt.Errorf("%w: %v", ErrNotFound, err)}
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) || strings.Contains(err.Error(), "missing username or password") {
		return &Error{Ref: ref, Op: op, Err: fmt.Errorf("%w: the registry asks for a user name and password: %v", ErrAuthentication, err)}
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) || isTLSError(err) {
		return &transportError{err: err}
	}
	return &Error{Ref: ref, Op: op, Err: fmt.Errorf("%w: %v", ErrRegistry, err)}
}

// isTLSError reports a TLS handshake failure, such as an HTTPS request
// answered by an HTTP server.
func isTLSError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "server gave HTTP response to HTTPS client") || strings.Contains(s, "tls: ")
}
