package ramdisk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPyPIURL is the package index FetchIPA downloads from.
const DefaultPyPIURL = "https://pypi.org"

// IPAProject is the agent's project name on the package index.
const IPAProject = "ironic-python-agent"

// maxSdist bounds a downloaded source release (IPA's are about 1 MiB),
// maxIndexJSON the index's answer about one release.
const (
	maxSdist     = 64 << 20
	maxIndexJSON = 4 << 20
)

// FetchIPA returns the source release (sdist) of ironic-python-agent
// version from the cache, downloading it from the package index at base
// (DefaultPyPIURL when empty; its JSON API, /pypi/<project>/<version>/json)
// when the cache has none. The download is bounded in size and time and
// kept only when its SHA-256 is the one the index publishes for it. A
// machine that cannot reach the index gets an error wrapping
// ErrUnavailable that says to give the release as a file
// (Options.IPATarball, anvil-ramdisk --ipa-tarball).
func FetchIPA(ctx context.Context, c Cache, client *http.Client, base, version string) (string, error) {
	if base == "" {
		base = DefaultPyPIURL
	}
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	in := Inputs{"kind": "ipa-sdist", "project": IPAProject, "version": version, "index": base}
	var name string
	dir, _, err := c.Get(in, func(dir string) error {
		var err error
		name, err = downloadSdist(ctx, client, base, version, dir)
		return err
	})
	if err != nil {
		return "", err
	}
	if name == "" { // from the cache
		matches, _ := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
		if len(matches) != 1 {
			return "", fmt.Errorf("ramdisk: cached %s %s in %s: want one .tar.gz, found %d", IPAProject, version, dir, len(matches))
		}
		return matches[0], nil
	}
	return filepath.Join(dir, name), nil
}

// sdistRelease is the part of the index's JSON answer FetchIPA reads.
type sdistRelease struct {
	URLs []struct {
		PackageType string            `json:"packagetype"`
		Filename    string            `json:"filename"`
		URL         string            `json:"url"`
		Size        int64             `json:"size"`
		Digests     map[string]string `json:"digests"`
	} `json:"urls"`
}

func downloadSdist(ctx context.Context, client *http.Client, base, version, dir string) (string, error) {
	unreachable := func(what string, err error) error {
		return fmt.Errorf("%w: cannot download %s %s from %s (%s: %v); give the release as a file with --ipa-tarball (Options.IPATarball)",
			ErrUnavailable, IPAProject, version, base, what, err)
	}
	meta := strings.TrimRight(base, "/") + "/pypi/" + IPAProject + "/" + url.PathEscape(version) + "/json"
	body, err := get(ctx, client, meta, maxIndexJSON)
	if err != nil {
		return "", unreachable("the index", err)
	}
	var rel sdistRelease
	if err := json.Unmarshal(body, &rel); err != nil {
		return "", fmt.Errorf("ramdisk: %s: not the index's JSON: %v", meta, err)
	}
	for _, u := range rel.URLs {
		if u.PackageType != "sdist" {
			continue
		}
		want := strings.ToLower(u.Digests["sha256"])
		if len(want) != 64 {
			return "", fmt.Errorf("ramdisk: %s: the sdist %q has no SHA-256 digest", meta, u.Filename)
		}
		if u.Filename != filepath.Base(u.Filename) || !strings.HasSuffix(u.Filename, ".tar.gz") {
			return "", fmt.Errorf("ramdisk: %s: sdist file name %q: want a plain name ending .tar.gz", meta, u.Filename)
		}
		if u.Size > maxSdist {
			return "", fmt.Errorf("ramdisk: %s: the sdist %q is %d bytes, more than %d", meta, u.Filename, u.Size, maxSdist)
		}
		data, err := get(ctx, client, u.URL, maxSdist)
		if err != nil {
			return "", unreachable(u.Filename, err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			return "", fmt.Errorf("ramdisk: %s from %s has SHA-256 %s, the index publishes %s: not kept", u.Filename, u.URL, got, want)
		}
		if err := os.WriteFile(filepath.Join(dir, u.Filename), data, 0o644); err != nil {
			return "", err
		}
		return u.Filename, nil
	}
	return "", fmt.Errorf("ramdisk: %s lists no source release (sdist) of %s %s", meta, IPAProject, version)
}

// get reads the body of a GET of u, refusing more than limit bytes and
// any status but 200.
func get(ctx context.Context, client *http.Client, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("GET %s: more than %d bytes", u, limit)
	}
	return body, nil
}
