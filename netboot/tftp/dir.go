package tftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// DirHandler serves the regular files under the directory root. It opens
// root anew for each request (os.OpenRoot), so the directory may be
// replaced while the server runs, and resolves names inside it with
// os.Root's rules: no element, symbolic links included, may lead out of
// root. A name that does not exist is ErrNotFound; a directory, a device,
// a link out of root or a file the process may not read is ErrAccess.
func DirHandler(root string) Handler {
	return HandlerFunc(func(ctx context.Context, r *Request) (File, error) {
		dir, err := os.OpenRoot(root)
		if err != nil {
			return nil, fmt.Errorf("tftp: open root %s: %w", root, err)
		}
		defer dir.Close()
		f, err := dir.Open(r.Filename)
		if err != nil {
			return nil, classify(r.Filename, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("tftp: stat %q: %w", r.Filename, err)
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%w: %q is not a regular file (%s)", ErrAccess, r.Filename, fi.Mode().Type())
		}
		return &osFile{File: f, size: fi.Size()}, nil
	})
}

// classify maps an open error of os.Root to the Handler's sentinels.
// os.Root's "path escapes from parent" has no exported sentinel, so every
// failure but a missing file is an access violation.
func classify(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q: %w", ErrNotFound, name, err)
	}
	return fmt.Errorf("%w: %q: %w", ErrAccess, name, err)
}

// osFile is an open regular file with the size it had when opened.
type osFile struct {
	*os.File
	size int64
}

func (f *osFile) Size() int64 { return f.size }

var _ File = (*osFile)(nil)
