package rfdriver

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultDeployISOFetchTimeout bounds one download of a deploy ISO when
// Options.DeployISOFetchTimeout is unset.
const DefaultDeployISOFetchTimeout = 10 * time.Minute

// isoCache fetches deploy ISOs and keeps them, one file per URL, so that
// every node booting the same ISO does not download it again: a cached
// copy is revalidated with a conditional GET (ETag, Last-Modified) and
// replaced when the server has a new one. It belongs to a Drivers and its
// scratch directory is removed by Drivers.Close when it made one.
type isoCache struct {
	limit   int64
	timeout time.Duration
	client  *http.Client
	baseDir string // Options.DeployISOCacheDir, or "" for a private temporary one

	mu      sync.Mutex
	dir     string
	owned   bool
	keyLock map[string]*sync.Mutex
	entries map[string]cachedISO
}

// cachedISO is one downloaded deploy ISO.
type cachedISO struct {
	path         string
	etag         string
	lastModified string
	sha256       string
	size         int64
}

func newISOCache(o Options) *isoCache {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &isoCache{limit: o.MaxDeployISOSize, timeout: o.DeployISOFetchTimeout, baseDir: o.DeployISOCacheDir,
		client: &http.Client{Transport: tr}, keyLock: map[string]*sync.Mutex{}, entries: map[string]cachedISO{}}
}

// scratch returns the cache's directory, creating it on first use.
func (c *isoCache) scratch() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		return c.dir, nil
	}
	if c.baseDir != "" {
		if err := os.MkdirAll(c.baseDir, 0o700); err != nil {
			return "", fmt.Errorf("redfish: deploy ISO cache: %w", err)
		}
		c.dir = c.baseDir
		return c.dir, nil
	}
	d, err := os.MkdirTemp("", "anvil-redfish-iso-")
	if err != nil {
		return "", fmt.Errorf("redfish: deploy ISO cache: %w", err)
	}
	c.dir, c.owned = d, true
	return d, nil
}

// close removes the private scratch directory.
func (c *isoCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned && c.dir != "" {
		err := os.RemoveAll(c.dir)
		c.dir, c.owned = "", false
		c.entries = map[string]cachedISO{}
		return err
	}
	return nil
}

// lock serializes work on one source.
func (c *isoCache) lock(key string) func() {
	c.mu.Lock()
	l, ok := c.keyLock[key]
	if !ok {
		l = &sync.Mutex{}
		c.keyLock[key] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// localPath returns the file a deploy ISO reference names on this host
// (an absolute path or a file:// URL), or "".
func localPath(src string) string {
	if p, ok := strings.CutPrefix(src, "file://"); ok {
		return p
	}
	if filepath.IsAbs(src) {
		return src
	}
	return ""
}

// open returns the deploy ISO src opened for reading, its size and, for
// a download, its SHA-256: a local file as it is, an http(s) URL from
// the cache after a conditional GET. node and key name the node and the
// driver_info field in a DeployISOTooLargeError.
func (c *isoCache) open(ctx context.Context, node, key, src string) (*os.File, int64, string, error) {
	if p := localPath(src); p != "" {
		st, err := os.Stat(p)
		if err != nil {
			return nil, 0, "", fmt.Errorf("redfish: deploy ISO: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, 0, "", fmt.Errorf("redfish: deploy ISO %s is not a regular file", p)
		}
		if st.Size() > c.limit {
			return nil, 0, "", &DeployISOTooLargeError{Node: node, Field: "driver_info", Key: key, Limit: c.limit, Size: st.Size()}
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, 0, "", fmt.Errorf("redfish: deploy ISO: %w", err)
		}
		return f, st.Size(), "", nil
	}
	unlock := c.lock(src)
	defer unlock()
	dir, err := c.scratch()
	if err != nil {
		return nil, 0, "", err
	}
	c.mu.Lock()
	cached, have := c.entries[src]
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, 0, "", fmt.Errorf("redfish: deploy ISO of %s: %w", key, err)
	}
	if have {
		if cached.etag != "" {
			req.Header.Set("If-None-Match", cached.etag)
		}
		if cached.lastModified != "" {
			req.Header.Set("If-Modified-Since", cached.lastModified)
		}
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, 0, "", fmt.Errorf("redfish: fetch the deploy ISO of %s: %w", key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && have {
		f, err := os.Open(cached.path)
		if err != nil {
			return nil, 0, "", fmt.Errorf("redfish: deploy ISO cache: %w", err)
		}
		return f, cached.size, cached.sha256, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, "", fmt.Errorf("redfish: fetch the deploy ISO of %s: HTTP %d", key, resp.StatusCode)
	}
	if resp.ContentLength > c.limit {
		return nil, 0, "", &DeployISOTooLargeError{Node: node, Field: "driver_info", Key: key, Limit: c.limit, Size: resp.ContentLength}
	}
	tmp, err := os.CreateTemp(dir, ".fetch-")
	if err != nil {
		return nil, 0, "", fmt.Errorf("redfish: deploy ISO cache: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, c.limit+1))
	if err != nil {
		return nil, 0, "", fmt.Errorf("redfish: fetch the deploy ISO of %s: %w", key, err)
	}
	if n > c.limit {
		return nil, 0, "", &DeployISOTooLargeError{Node: node, Field: "driver_info", Key: key, Limit: c.limit, Size: -1}
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return nil, 0, "", fmt.Errorf("redfish: fetch the deploy ISO of %s: got %d of %d bytes", key, n, resp.ContentLength)
	}
	urlSum := sha256.Sum256([]byte(src))
	final := filepath.Join(dir, hex.EncodeToString(urlSum[:12])+".iso")
	// A reader of the previous copy keeps its open file across the rename.
	if err := os.Rename(tmp.Name(), final); err != nil {
		return nil, 0, "", fmt.Errorf("redfish: deploy ISO cache: %w", err)
	}
	keep = true
	c.mu.Lock()
	c.entries[src] = cachedISO{path: final, etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"),
		sha256: hex.EncodeToString(h.Sum(nil)), size: n}
	c.mu.Unlock()
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		tmp.Close()
		return nil, 0, "", fmt.Errorf("redfish: deploy ISO cache: %w", err)
	}
	return tmp, n, hex.EncodeToString(h.Sum(nil)), nil
}
