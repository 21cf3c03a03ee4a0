package vmlab

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

// espFiles reads the FAT file system of size bytes at offset off of the
// disk image at p and returns every file's contents by its path (a
// directory maps to nil). The walk is bounded: 16 levels, 4,096 entries.
//
// Comparing an EFI System Partition file by file, not byte for byte, is
// what "the disk holds the image's ESP" means: Linux's vfat records a
// read's access date in the file's directory entry, and IPA mounts the
// ESP and reads its BOOTX64.CSV to make the boot entry, so a deploy on
// a later day than the image was built rewrites those dates (CI found
// it when a run crossed midnight with an image cached the day before).
func espFiles(p string, off, size int64) (map[string][]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := file.New(f, true)
	var fs filesystem.FileSystem
	if fs16, err := fat16.Read(b, size, off, 512); err == nil {
		fs = fs16
	} else if fs32, err32 := fat32.Read(b, size, off, 512); err32 == nil {
		fs = fs32
	} else {
		return nil, fmt.Errorf("%s at %d: neither FAT16 (%v) nor FAT32 (%v)", p, off, err, err32)
	}
	files := map[string][]byte{}
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > 16 {
			return fmt.Errorf("%s: directories nested deeper than 16 at %s", p, dir)
		}
		des, err := fs.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("%s: directory %s: %w", p, dir, err)
		}
		for _, de := range des {
			name := de.Name()
			if name == "." || name == ".." || name == "" {
				continue
			}
			if len(files) >= 4096 {
				return fmt.Errorf("%s: more than 4096 entries", p)
			}
			full := path.Join(dir, name)
			if de.IsDir() {
				files[full] = nil
				if err := walk(full, depth+1); err != nil {
					return err
				}
				continue
			}
			data, err := fs.ReadFile(full)
			if err != nil {
				return fmt.Errorf("%s: read %s: %w", p, full, err)
			}
			files[full] = data
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return nil, err
	}
	return files, nil
}

// espDiff names what differs between two ESPs read by espFiles: paths
// only one holds and files whose contents differ; "" when they match.
func espDiff(want, got map[string][]byte) string {
	var diffs []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+p)
		case (w == nil) != (g == nil):
			diffs = append(diffs, "file or directory differs: "+p)
		case !bytes.Equal(w, g):
			diffs = append(diffs, fmt.Sprintf("contents differ: %s (%d bytes, want %d)", p, len(g), len(w)))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, "extra "+p)
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}
