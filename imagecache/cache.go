package imagecache

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/anvilmetal/anvil/imagecache/oci"
)

// Defaults of Options, Ironic's where Ironic has the option.
const (
	DefaultMaxBytes         = 20 << 30 // [pxe]image_cache_size 20480 MiB
	DefaultTTL              = 7 * 24 * time.Hour
	DefaultMaxImageBytes    = 64 << 30
	DefaultFetchTimeout     = time.Hour
	DefaultGrantTTL         = 2 * time.Hour
	DefaultConcurrency      = 20      // [DEFAULT]image_download_concurrency
	DefaultConvertMemory    = 2 << 30 // [disk_utils]image_convert_memory_limit 2048 MiB
	DefaultConvertCPU       = 30 * time.Minute
	DefaultConvertAttempts  = 3 // [disk_utils]image_convert_attempts
	DefaultCleanUpInterval  = time.Hour
	maxChecksumFileBytes    = 1 << 20
	metaSuffix, partSuffix  = ".json", ".part"
	rawSuffix, decompSuffix = ".raw", ".decomp"
)

// Errors callers branch on. Every error of NodeImage wraps one of them
// (or an *oci.Error, or a context error) inside an *Error.
var (
	// ErrInvalidSource: the request cannot name an image (scheme, missing
	// or malformed checksum).
	ErrInvalidSource = errors.New("invalid image source")
	// ErrDownload: the origin could not be read (status, network, size
	// bound, time bound).
	ErrDownload = errors.New("image download failed")
	// ErrChecksum: the bytes do not match the checksum or digest.
	ErrChecksum = errors.New("image checksum mismatch")
	// ErrFormat: the image's format is not permitted or not safe.
	ErrFormat = errors.New("image format refused")
	// ErrConvert: qemu-img could not convert the image.
	ErrConvert = errors.New("image conversion failed")
	// ErrNoSpace: the cache could not free the disk space the image needs.
	ErrNoSpace = errors.New("insufficient disk space for the image cache")
	// ErrClosed: the cache was closed.
	ErrClosed = errors.New("image cache closed")
)

// Error is a failure to provide an image: which source, why.
type Error struct {
	Source string
	Err    error
}

func (e *Error) Error() string { return "imagecache: " + e.Source + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Options configure a Cache.
type Options struct {
	// Dir holds the cached images (Ironic's [pxe]instance_master_path);
	// required. Images found there at New are kept.
	Dir string
	// MaxBytes is the cache size the clean-up keeps to ([pxe]image_cache_size).
	MaxBytes int64
	// TTL: an unused image older than this is removed at clean-up
	// ([pxe]image_cache_ttl).
	TTL time.Duration
	// MaxImageBytes bounds one download, and its conversion.
	MaxImageBytes int64
	// FetchTimeout bounds one download from its start.
	FetchTimeout time.Duration
	// GrantTTL bounds how long a node's URL works if ReleaseNode is never
	// called.
	GrantTTL time.Duration
	// Concurrency bounds simultaneous downloads ([DEFAULT]image_download_concurrency).
	Concurrency int
	// HTTPClient downloads http(s) images; nil is a client whose
	// response headers must come within a minute.
	HTTPClient *http.Client
	// OCI resolves oci:// sources; nil is oci.NewResolver(oci.Options{}).
	OCI *oci.Resolver
	// QemuImg and Prlimit are the converter's programs (defaults
	// "qemu-img" and "prlimit" on PATH); ConvertMemory its address-space
	// limit in bytes, ConvertCPU its CPU-time limit, ConvertAttempts how
	// often a conversion that ran out of memory is tried.
	QemuImg, Prlimit string
	ConvertMemory    int64
	ConvertCPU       time.Duration
	ConvertAttempts  int
	// PermittedFormats is [conductor]permitted_image_formats.
	PermittedFormats []string
	// AllowMD5 is [conductor]allow_md5_checksum: off, an md5
	// image_checksum is refused.
	AllowMD5 bool
	// URLBase is where Handler is mounted as agents reach it, e.g.
	// http://192.0.2.1:6385/images/; required.
	URLBase string
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Request names the image a node deploys.
type Request struct {
	// Source is the image_source (or image_url): http(s):// or oci://.
	Source string
	// Checksum is instance_info.image_checksum: a hex digest (md5,
	// sha256 or sha512 by its length) or the URL of a checksum file.
	Checksum string
	// HashAlgo and HashValue are image_os_hash_algo and _value.
	HashAlgo, HashValue string
	// PullSecret and CPUArch are for oci:// sources.
	PullSecret, CPUArch string
	// ForceRaw converts qcow2 images to raw ([DEFAULT]force_raw_images).
	ForceRaw bool
}

// NodeImage is an image served to one node.
type NodeImage struct {
	// URL is the node's own, unguessable URL of the image.
	URL string
	// DiskFormat is the served file's format (raw after a conversion).
	DiskFormat string
	// HashAlgo and HashValue are the served file's SHA-256.
	HashAlgo, HashValue string
	Size                int64
	// Expires is when the URL stops working unless released earlier.
	Expires time.Time
	// Origin is the verified origin checksum ("sha256:..." for OCI).
	Origin string
}

// Stats counts what the cache did since New.
type Stats struct {
	// Downloads and OriginBytes: completed downloads from origins.
	Downloads   int64
	OriginBytes int64
	// Hits: requests served from a cached (or in-progress) image.
	Hits int64
	// Conversions to raw.
	Conversions int64
	// ServedBytes: bytes sent by Handler.
	ServedBytes int64
	// Evictions: images removed by clean-up.
	Evictions int64
}

// entry is one cached image.
type entry struct {
	key   string
	done  chan struct{} // closed when the download ends
	err   error         // the download's failure (set before done closes)
	meta  meta
	refs  int  // grants and waiters holding it (under Cache.mu)
	ready bool // downloaded (under Cache.mu)
	used  time.Time
	// touch orders uses that share a clock reading (a coarse clock, or
	// two releases in one instant): the least recently used is the one
	// touched first, never the one a map iteration happens to yield.
	touch uint64
}

// meta is what is persisted beside each image.
type meta struct {
	Source  string    `json:"source"`
	Origin  string    `json:"origin"`
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	Format  string    `json:"format"`
	Created time.Time `json:"created"`
}

// grant is a node's URL.
type grant struct {
	token   string
	node    string
	e       *entry
	expires time.Time
}

// Cache is the conductor's image cache: it downloads each image once
// (concurrent requests for one image wait for the one download, and all
// fail with its cause), verifies it, optionally converts it to raw,
// keeps it in a size-bounded directory shared by all nodes (one copy per
// image, reference counted by the nodes using it, removed when unused
// past the TTL or under disk pressure, oldest first) and serves it to
// each node from its own unguessable URL until the node is released.
// It knows nothing of nodes' states: the deploy interface asks for a
// node's image and releases it.
type Cache struct {
	o    Options
	log  *slog.Logger
	now  func() time.Time
	oci  *oci.Resolver
	conv converter
	sem  chan struct{}
	base *url.URL

	ctx    context.Context // downloads' lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// free reports the space available to Dir (statfs; tests replace it).
	free func() (int64, error)

	mu      sync.Mutex
	entries map[string]*entry
	grants  map[string]*grant // by token
	byNode  map[string]*grant
	closed  bool
	touches uint64 // the last entry.touch handed out (under mu)

	downloads, originBytes, hits, conversions, served, evictions atomic.Int64
}

// New opens the cache directory, keeping the images a previous run left
// complete and removing partial ones.
func New(o Options) (*Cache, error) {
	if o.Dir == "" {
		return nil, errors.New("imagecache: Options.Dir is required")
	}
	base, err := url.Parse(o.URLBase)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("imagecache: Options.URLBase %q: want the http(s) URL the handler is mounted at", o.URLBase)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxBytes, DefaultMaxBytes)
	def(&o.MaxImageBytes, DefaultMaxImageBytes)
	def(&o.ConvertMemory, DefaultConvertMemory)
	defD(&o.TTL, DefaultTTL)
	defD(&o.FetchTimeout, DefaultFetchTimeout)
	defD(&o.GrantTTL, DefaultGrantTTL)
	defD(&o.ConvertCPU, DefaultConvertCPU)
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ConvertAttempts <= 0 {
		o.ConvertAttempts = DefaultConvertAttempts
	}
	if len(o.PermittedFormats) == 0 {
		o.PermittedFormats = DefaultPermittedFormats
	}
	if o.QemuImg == "" {
		o.QemuImg = "qemu-img"
	}
	if o.Prlimit == "" {
		o.Prlimit = "prlimit"
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: time.Minute, TLSHandshakeTimeout: 10 * time.Second}}
	}
	c := &Cache{o: o, log: o.Logger, now: o.Now, oci: o.OCI, base: base, sem: make(chan struct{}, o.Concurrency),
		entries: map[string]*entry{}, grants: map[string]*grant{}, byNode: map[string]*grant{},
		conv: converter{qemuImg: o.QemuImg, prlimit: o.Prlimit, memory: o.ConvertMemory, cpu: o.ConvertCPU, attempts: o.ConvertAttempts}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.oci == nil {
		c.oci = oci.NewResolver(oci.Options{})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("imagecache: %w", err)
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load adopts the complete images in Dir and removes everything else.
func (c *Cache) load() error {
	des, err := os.ReadDir(c.o.Dir)
	if err != nil {
		return fmt.Errorf("imagecache: %w", err)
	}
	keep := map[string]bool{}
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, metaSuffix) {
			continue
		}
		key := strings.TrimSuffix(name, metaSuffix)
		b, err := os.ReadFile(filepath.Join(c.o.Dir, name))
		var m meta
		if err != nil || json.Unmarshal(b, &m) != nil {
			continue
		}
		st, err := os.Stat(filepath.Join(c.o.Dir, key))
		if err != nil || st.Size() != m.Size {
			continue
		}
		done := make(chan struct{})
		close(done)
		c.entries[key] = &entry{key: key, done: done, meta: m, used: st.ModTime(), ready: true}
		keep[key], keep[name] = true, true
	}
	for _, de := range des {
		if !keep[de.Name()] {
			_ = os.RemoveAll(filepath.Join(c.o.Dir, de.Name()))
		}
	}
	return nil
}

// Close stops the downloads in progress (their waiters fail with
// ErrClosed) and revokes every URL; cached images stay on disk.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.grants, c.byNode = map[string]*grant{}, map[string]*grant{}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	return Stats{Downloads: c.downloads.Load(), OriginBytes: c.originBytes.Load(), Hits: c.hits.Load(),
		Conversions: c.conversions.Load(), ServedBytes: c.served.Load(), Evictions: c.evictions.Load()}
}

// checksum is a parsed expected checksum.
type checksum struct {
	algo, value string // value "" when it comes from a file at url
	url         string
}

func (c *Cache) parseChecksum(req Request) (checksum, error) {
	bad := func(f string, a ...any) (checksum, error) {
		return checksum{}, &Error{Source: req.Source, Err: fmt.Errorf("%w: "+f, append([]any{ErrInvalidSource}, a...)...)}
	}
	if req.HashAlgo != "" || req.HashValue != "" {
		if !slices.Contains([]string{"md5", "sha1", "sha224", "sha256", "sha384", "sha512"}, req.HashAlgo) || req.HashValue == "" {
			return bad("image_os_hash_algo %q with image_os_hash_value: want md5, sha1, sha224, sha256, sha384 or sha512 and a hex value", req.HashAlgo)
		}
		if req.HashAlgo == "md5" && !c.o.AllowMD5 {
			return bad("an md5 checksum is not permitted ([conductor]allow_md5_checksum)")
		}
		return checksum{algo: req.HashAlgo, value: strings.ToLower(req.HashValue)}, nil
	}
	s := strings.TrimSpace(req.Checksum)
	if s == "" {
		return bad("no image_checksum (or image_os_hash_algo and image_os_hash_value)")
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return checksum{url: s}, nil
	}
	if a, v, ok := strings.Cut(s, ":"); ok {
		s, req.HashAlgo = v, a
	}
	algo := map[int]string{32: "md5", 64: "sha256", 128: "sha512"}[len(s)]
	if _, err := hex.DecodeString(s); err != nil || algo == "" {
		return bad("image_checksum %q: want an md5, sha256 or sha512 hex digest, or a checksum file URL", req.Checksum)
	}
	if algo == "md5" && !c.o.AllowMD5 {
		return bad("an md5 image_checksum is not permitted ([conductor]allow_md5_checksum)")
	}
	return checksum{algo: algo, value: strings.ToLower(s)}, nil
}

func newHash(algo string) hash.Hash {
	switch algo {
	case "md5":
		return md5.New()
	case "sha1":
		return sha1.New()
	case "sha224":
		return sha256.New224()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return sha256.New()
}

// source is a resolved request: the key of its cache entry and how to
// download it.
type source struct {
	req      Request
	key      string
	origin   string // what the bytes are verified against
	sum      checksum
	artifact *oci.Artifact
}

func (c *Cache) resolve(ctx context.Context, req Request) (*source, error) {
	s := &source{req: req}
	var id string
	switch {
	case oci.IsOCI(req.Source):
		a, err := c.oci.Resolve(ctx, oci.Request{Ref: req.Source, CPUArch: req.CPUArch, DownloadSource: "local", PullSecret: req.PullSecret})
		if err != nil {
			return nil, &Error{Source: req.Source, Err: err}
		}
		s.artifact = a
		algo, value := a.Checksum()
		s.sum = checksum{algo: algo, value: value}
		// The blob is content-addressed: one copy whichever tag or
		// repository names it.
		id = "oci|" + a.Ref.Registry + "|" + a.Digest
	case strings.HasPrefix(req.Source, "http://") || strings.HasPrefix(req.Source, "https://"):
		if _, err := url.Parse(req.Source); err != nil {
			return nil, &Error{Source: req.Source, Err: fmt.Errorf("%w: %v", ErrInvalidSource, err)}
		}
		sum, err := c.parseChecksum(req)
		if err != nil {
			return nil, err
		}
		s.sum = sum
		id = "http|" + req.Source + "|" + sum.algo + ":" + sum.value + sum.url
	default:
		return nil, &Error{Source: req.Source, Err: fmt.Errorf("%w: want an http(s):// or oci:// image source", ErrInvalidSource)}
	}
	if req.ForceRaw {
		id += "|raw"
	}
	h := sha256.Sum256([]byte(id))
	s.key = hex.EncodeToString(h[:16])
	return s, nil
}

// NodeImage returns node's URL of the image req names, downloading it
// first unless it is cached or being downloaded (then it waits for that
// download). It holds the image for the node until ReleaseNode (or the
// grant expires); a second call for the node replaces its grant. A
// download that fails fails every request waiting for it, with its
// cause; the next request tries again. ctx bounds the wait, not the
// download, which other nodes may be waiting for.
func (c *Cache) NodeImage(ctx context.Context, node string, req Request) (NodeImage, error) {
	src, err := c.resolve(ctx, req)
	if err != nil {
		return NodeImage{}, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return NodeImage{}, &Error{Source: req.Source, Err: ErrClosed}
	}
	e, ok := c.entries[src.key]
	if ok {
		c.hits.Add(1)
	} else {
		e = &entry{key: src.key, done: make(chan struct{})}
		c.entries[src.key] = e
		c.wg.Add(1)
		go c.download(e, src) // ends when the download does; Close cancels it
	}
	e.refs++ // held while waiting, so clean-up cannot take it
	c.mu.Unlock()
	release := func() {
		c.mu.Lock()
		e.refs--
		c.mu.Unlock()
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		release()
		return NodeImage{}, &Error{Source: req.Source, Err: ctx.Err()}
	}
	if e.err != nil {
		release()
		return NodeImage{}, &Error{Source: req.Source, Err: e.err}
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		release()
		return NodeImage{}, err
	}
	g := &grant{token: base64.RawURLEncoding.EncodeToString(tok), node: node, e: e, expires: c.now().Add(c.o.GrantTTL)}
	c.mu.Lock()
	if old := c.byNode[node]; old != nil {
		delete(c.grants, old.token)
		old.e.refs--
	}
	c.byNode[node], c.grants[g.token] = g, g
	c.use(e)
	c.mu.Unlock()
	now := c.now()
	_ = os.Chtimes(filepath.Join(c.o.Dir, e.key), now, now)
	u := *c.base
	u.Path = path.Join(c.base.Path, g.token)
	return NodeImage{URL: u.String(), DiskFormat: e.meta.Format, HashAlgo: "sha256", HashValue: e.meta.SHA256,
		Size: e.meta.Size, Expires: g.expires, Origin: e.meta.Origin}, nil
}

// use records that e was used now; c.mu is held.
func (c *Cache) use(e *entry) {
	c.touches++
	e.used, e.touch = c.now(), c.touches
}

// ReleaseNode revokes node's URL and drops its hold on the image. It is
// idempotent.
func (c *Cache) ReleaseNode(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.byNode[node]; g != nil {
		delete(c.byNode, node)
		delete(c.grants, g.token)
		g.e.refs--
		c.use(g.e)
	}
}

// Holds reports how many nodes hold the image node is served (0 when
// node holds none): for tests and diagnostics.
func (c *Cache) Holds(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.byNode[node]; g != nil {
		return g.e.refs
	}
	return 0
}

// download fetches, verifies and converts src into e, then cleans up.
func (c *Cache) download(e *entry, src *source) {
	defer c.wg.Done()
	m, err := c.fetch(src)
	c.mu.Lock()
	if err != nil {
		e.err = err
		delete(c.entries, e.key) // the next request tries again
	} else {
		e.meta, e.ready = m, true
		c.use(e)
		// The cache grew: clean up before the waiters go on (they hold
		// the new image).
		c.cleanUpLocked(0)
	}
	c.mu.Unlock()
	close(e.done)
	if err != nil {
		c.log.Warn("imagecache: download failed", "source", src.req.Source, "error", err)
	}
}

func (c *Cache) fetch(src *source) (meta, error) {
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-c.ctx.Done():
		return meta{}, ErrClosed
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.o.FetchTimeout)
	defer cancel()
	began := c.now()
	final := filepath.Join(c.o.Dir, src.key)
	part := final + partSuffix
	defer os.Remove(part)
	n, err := c.copyOrigin(ctx, src, part)
	if err != nil {
		if c.ctx.Err() != nil {
			return meta{}, ErrClosed
		}
		return meta{}, err
	}
	c.downloads.Add(1)
	c.originBytes.Add(n)
	file := part
	// Decompress a compressed OCI layer.
	if a := src.artifact; a != nil && a.Compression != "" {
		dec := final + decompSuffix
		defer os.Remove(dec)
		if err := c.decompress(ctx, part, dec, a.Compression); err != nil {
			return meta{}, err
		}
		file = dec
	}
	info, err := inspect(file)
	if err != nil {
		return meta{}, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if !slices.Contains(c.o.PermittedFormats, info.format) {
		return meta{}, fmt.Errorf("%w: the image is %s; permitted: %s ([conductor]permitted_image_formats)", ErrFormat, info.format, strings.Join(c.o.PermittedFormats, ", "))
	}
	format := info.format
	if src.req.ForceRaw && info.format == FormatQCOW2 {
		if info.virtualSize > c.o.MaxImageBytes {
			return meta{}, fmt.Errorf("%w: the raw image would be %d bytes, more than %d", ErrConvert, info.virtualSize, c.o.MaxImageBytes)
		}
		if err := c.ensureSpace(info.virtualSize); err != nil {
			return meta{}, err
		}
		raw := final + rawSuffix
		defer os.Remove(raw)
		if err := c.conv.convert(ctx, file, raw, FormatQCOW2); err != nil {
			return meta{}, fmt.Errorf("%w: %v", ErrConvert, err)
		}
		c.conversions.Add(1)
		file, format = raw, FormatRaw
	}
	sum, size, err := fileSHA256(file)
	if err != nil {
		return meta{}, err
	}
	m := meta{Source: src.req.Source, Origin: src.origin, SHA256: sum, Size: size, Format: format, Created: c.now()}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(final+metaSuffix, b, 0o600); err != nil {
		return meta{}, err
	}
	if err := os.Rename(file, final); err != nil {
		os.Remove(final + metaSuffix)
		return meta{}, err
	}
	c.log.Info("imagecache: image cached", "source", src.req.Source, "bytes", n, "format", format, "seconds", c.now().Sub(began).Seconds())
	return m, nil
}

// copyOrigin downloads the origin into part, bounded in size, and checks
// it against the checksum or digest.
func (c *Cache) copyOrigin(ctx context.Context, src *source, part string) (int64, error) {
	var (
		body   io.ReadCloser
		expect = int64(-1)
	)
	if a := src.artifact; a != nil {
		if a.Size > c.o.MaxImageBytes {
			return 0, fmt.Errorf("%w: the blob is %d bytes, more than %d", ErrDownload, a.Size, c.o.MaxImageBytes)
		}
		if err := c.ensureSpace(a.Size); err != nil {
			return 0, err
		}
		rc, err := a.Open(ctx)
		if err != nil {
			return 0, err
		}
		body, expect = rc, a.Size
		src.origin = a.Digest
	} else {
		if src.sum.url != "" {
			v, algo, err := c.checksumFromURL(ctx, src.req.Source, src.sum.url)
			if err != nil {
				return 0, err
			}
			src.sum.value, src.sum.algo = v, algo
		}
		src.origin = src.sum.algo + ":" + src.sum.value
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.req.Source, nil)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalidSource, err)
		}
		resp, err := c.o.HTTPClient.Do(req)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrDownload, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return 0, fmt.Errorf("%w: GET %s: %s", ErrDownload, src.req.Source, resp.Status)
		}
		if resp.ContentLength > c.o.MaxImageBytes {
			resp.Body.Close()
			return 0, fmt.Errorf("%w: the image is %d bytes, more than %d", ErrDownload, resp.ContentLength, c.o.MaxImageBytes)
		}
		if resp.ContentLength > 0 {
			if err := c.ensureSpace(resp.ContentLength); err != nil {
				resp.Body.Close()
				return 0, err
			}
		}
		body, expect = resp.Body, resp.ContentLength
	}
	defer body.Close()
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	h := newHash(src.sum.algo)
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, c.o.MaxImageBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("%w: after %d bytes: %v", ErrDownload, n, err)
	}
	if n > c.o.MaxImageBytes {
		return n, fmt.Errorf("%w: more than %d bytes", ErrDownload, c.o.MaxImageBytes)
	}
	if expect >= 0 && n != expect {
		return n, fmt.Errorf("%w: %d bytes, expected %d", ErrDownload, n, expect)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != src.sum.value {
		return n, fmt.Errorf("%w: %s %s, expected %s", ErrChecksum, src.sum.algo, got, src.sum.value)
	}
	return n, nil
}

// checksumFromURL reads a checksum file (one "digest  filename" per
// line, or a lone digest) and returns the image's digest.
func (c *Cache) checksumFromURL(ctx context.Context, image, u string) (string, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", "", fmt.Errorf("%w: image_checksum %q: %v", ErrInvalidSource, u, err)
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("%w: checksum file: %v", ErrDownload, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("%w: checksum file %s: %s", ErrDownload, u, resp.Status)
	}
	name := path.Base(image)
	sc := bufio.NewScanner(io.LimitReader(resp.Body, maxChecksumFileBytes))
	var lone []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1:
			lone = append(lone, f[0])
		case len(f) >= 2 && strings.TrimPrefix(f[len(f)-1], "*") == name:
			if algo := map[int]string{32: "md5", 64: "sha256", 128: "sha512"}[len(f[0])]; algo != "" && (algo != "md5" || c.o.AllowMD5) {
				return strings.ToLower(f[0]), algo, nil
			}
		}
	}
	if len(lone) == 1 {
		if algo := map[int]string{64: "sha256", 128: "sha512"}[len(lone[0])]; algo != "" {
			return strings.ToLower(lone[0]), algo, nil
		}
	}
	return "", "", fmt.Errorf("%w: the checksum file %s has no usable checksum for %s", ErrInvalidSource, u, name)
}

func (c *Cache) decompress(ctx context.Context, from, to, kind string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	var r io.Reader
	switch kind {
	case "gzip":
		g, err := gzip.NewReader(in)
		if err != nil {
			return fmt.Errorf("%w: gzip: %v", ErrFormat, err)
		}
		defer g.Close()
		r = g
	case "zstd":
		z, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return fmt.Errorf("%w: zstd: %v", ErrFormat, err)
		}
		defer z.Close()
		r = z
	default:
		return fmt.Errorf("%w: compression %q", ErrFormat, kind)
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(ctxReader{ctx, r}, c.o.MaxImageBytes+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, kind, err)
	}
	if n > c.o.MaxImageBytes {
		return fmt.Errorf("%w: decompressed to more than %d bytes", ErrDownload, c.o.MaxImageBytes)
	}
	return nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func fileSHA256(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// freeBytes is the space available to the cache directory.
func (c *Cache) freeBytes() (int64, error) {
	if c.free != nil {
		return c.free()
	}
	var st unix.Statfs_t
	if err := unix.Statfs(c.o.Dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// ensureSpace frees disk space for need bytes, removing unused images
// (expired first, then the least recently used), as Ironic does before a
// download or a conversion; ErrNoSpace if it cannot.
func (c *Cache) ensureSpace(need int64) error {
	free, err := c.freeBytes()
	if err != nil {
		return err
	}
	if need < free {
		return nil
	}
	c.cleanUp(need - free)
	if free, err = c.freeBytes(); err != nil {
		return err
	}
	if need >= free {
		return fmt.Errorf("%w: %d MiB needed, %d MiB free in %s", ErrNoSpace, need>>20, free>>20, c.o.Dir)
	}
	return nil
}

// CleanUp removes unused images older than the TTL, then the least
// recently used unused ones while the cache is larger than MaxBytes, as
// Ironic's master image cache does. Images a node holds, and downloads
// in progress, are never removed.
func (c *Cache) CleanUp() { c.cleanUp(0) }

func (c *Cache) cleanUp(amount int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanUpLocked(amount)
}

func (c *Cache) cleanUpLocked(amount int64) {
	now := c.now()
	var total int64
	var unused []*entry
	for _, e := range c.entries {
		if !e.ready {
			continue // downloading
		}
		total += e.meta.Size
		if e.refs == 0 {
			unused = append(unused, e)
		}
	}
	slices.SortFunc(unused, func(a, b *entry) int {
		return cmp.Or(a.used.Compare(b.used), cmp.Compare(a.touch, b.touch))
	})
	remove := func(e *entry) {
		delete(c.entries, e.key)
		_ = os.Remove(filepath.Join(c.o.Dir, e.key))
		_ = os.Remove(filepath.Join(c.o.Dir, e.key+metaSuffix))
		total -= e.meta.Size
		amount -= e.meta.Size
		c.evictions.Add(1)
		c.log.Info("imagecache: image removed", "source", e.meta.Source, "bytes", e.meta.Size, "last_used", e.used)
	}
	var left []*entry
	for _, e := range unused {
		if now.Sub(e.used) > c.o.TTL {
			remove(e)
			continue
		}
		left = append(left, e)
	}
	for _, e := range left {
		if total <= c.o.MaxBytes && amount <= 0 {
			break
		}
		remove(e)
	}
}

// Run cleans up every interval (Ironic's [conductor]cache_clean_up_interval;
// DefaultCleanUpInterval when 0) and expires grants, until ctx ends.
func (c *Cache) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultCleanUpInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.expireGrants()
			c.CleanUp()
		}
	}
}

func (c *Cache) expireGrants() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for tok, g := range c.grants {
		if now.After(g.expires) {
			delete(c.grants, tok)
			delete(c.byNode, g.node)
			g.e.refs--
		}
	}
}

// Handler serves each node's image at URLBase/<token> (GET and HEAD,
// with ranges). An unknown, released or expired token is 404.
func (c *Cache) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		tok := path.Base(r.URL.Path)
		c.mu.Lock()
		g := c.grants[tok]
		if g != nil && c.now().After(g.expires) {
			g = nil
		}
		var e *entry
		if g != nil {
			e = g.e
			e.refs++ // held while being sent
		}
		c.mu.Unlock()
		if e == nil {
			http.NotFound(w, r)
			return
		}
		defer func() {
			c.mu.Lock()
			e.refs--
			c.use(e)
			c.mu.Unlock()
		}()
		f, err := os.Open(filepath.Join(c.o.Dir, e.key))
		if err != nil {
			http.Error(w, "image unavailable", http.StatusInternalServerError)
			return
		}
		defer f.Close()
		// An image outlasts the API server's write timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", "no-store")
		cw := &countingWriter{ResponseWriter: w}
		http.ServeContent(cw, r, "", e.meta.Created, f)
		c.served.Add(cw.n)
	})
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Available reports whether conversion can run here (qemu-img and
// prlimit on PATH).
func (c *Cache) Available() error {
	for _, p := range []string{c.o.QemuImg, c.o.Prlimit} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("imagecache: %s not found: %w", p, err)
		}
	}
	return nil
}
