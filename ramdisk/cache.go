package ramdisk

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Cache keeps built guest images on the machine, one directory per
// distinct set of inputs: a new machine builds each image once, and a
// change of any input (a new kernel package version, a changed init
// script) builds a new one beside the old.
type Cache struct {
	Dir string
}

// DefaultCache returns the cache at <user cache dir>/anvil/ramdisk
// ($XDG_CACHE_HOME or ~/.cache).
func DefaultCache() (Cache, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return Cache{}, fmt.Errorf("ramdisk: cache directory: %w", err)
	}
	return Cache{Dir: filepath.Join(base, "anvil", "ramdisk")}, nil
}

// Inputs name everything an image is built from; their hash is its cache
// key. "kind" should always be one of them.
type Inputs map[string]string

// Key is the hex SHA-256 of the inputs, sorted by name.
func (in Inputs) Key() string {
	h := sha256.New()
	for _, k := range sortedKeys(in) {
		fmt.Fprintf(h, "%d:%s=%d:%s\n", len(k), k, len(in[k]), in[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Get returns the directory of the image with these inputs, calling build
// to fill a fresh directory when there is none. A build that fails leaves
// nothing behind; two processes building at once both succeed and one
// result is kept (the directory appears by an atomic rename). The second
// result reports whether the image was built now.
func (c Cache) Get(in Inputs, build func(dir string) error) (string, bool, error) {
	if c.Dir == "" {
		return "", false, errors.New("ramdisk: cache has no directory")
	}
	kind := in["kind"]
	if kind == "" || strings.ContainsAny(kind, "/\\") {
		return "", false, fmt.Errorf("ramdisk: cache inputs need a plain kind, got %q", kind)
	}
	dir := filepath.Join(c.Dir, kind+"-"+in.Key()[:32])
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return dir, false, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", false, fmt.Errorf("ramdisk: cache: %w", err)
	}
	tmp, err := os.MkdirTemp(c.Dir, ".build-"+kind+"-")
	if err != nil {
		return "", false, fmt.Errorf("ramdisk: cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := build(tmp); err != nil {
		return "", false, err
	}
	var text strings.Builder
	for _, k := range sortedKeys(in) {
		fmt.Fprintf(&text, "%s=%s\n", k, in[k])
	}
	if err := os.WriteFile(filepath.Join(tmp, "INPUTS"), []byte(text.String()), 0o644); err != nil {
		return "", false, fmt.Errorf("ramdisk: cache: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", false, fmt.Errorf("ramdisk: cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			return dir, true, nil // another process won the race
		}
		return "", false, fmt.Errorf("ramdisk: cache: %w", err)
	}
	return dir, true, nil
}

func sortedKeys(in Inputs) []string {
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
