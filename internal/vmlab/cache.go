package vmlab

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/ramdisk"
)

// CacheEnv, when set, names the image cache directory; otherwise it is
// anvil/vmlab under the user's cache directory ($XDG_CACHE_HOME or
// ~/.cache).
const CacheEnv = "ANVIL_VMLAB_CACHE"

// Cache keeps built guest images on the machine, one directory per
// distinct set of inputs (ramdisk.Cache, which builds the IPA ramdisk).
type Cache = ramdisk.Cache

// Inputs name everything an image is built from; their hash is its
// cache key.
type Inputs = ramdisk.Inputs

// DefaultCache returns the cache at $ANVIL_VMLAB_CACHE or
// <user cache dir>/anvil/vmlab.
func DefaultCache() (Cache, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return Cache{Dir: d}, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return Cache{}, fmt.Errorf("vmlab: cache directory: %w", err)
	}
	return Cache{Dir: filepath.Join(base, "anvil", "vmlab")}, nil
}
