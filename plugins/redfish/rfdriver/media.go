package rfdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// MediaStore publishes per-node images where a BMC can fetch them over
// HTTP(S), as Ironic's http_root and http_url do: the redfish-virtual-media
// boot interface puts each node's boot ISO (and parameters image) there
// before inserting it. Put reads the image from data (an ISO can be
// large, so it is streamed) and returns the URL the BMC fetches; Delete
// forgets the image (a missing one is not an error).
type MediaStore interface {
	Put(ctx context.Context, name string, data io.Reader) (url string, err error)
	Delete(ctx context.Context, name string) error
}

// DirMediaStore is a MediaStore that writes images into Dir, which the
// embedder serves over HTTP at BaseURL (any static file server that the
// BMCs can reach).
type DirMediaStore struct {
	Dir     string
	BaseURL string
}

var mediaName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$`)

// Put writes data to Dir/name (through a temporary file and a rename, so
// a BMC never fetches half an image) and returns BaseURL/name.
func (s DirMediaStore) Put(ctx context.Context, name string, data io.Reader) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !mediaName.MatchString(name) {
		return "", fmt.Errorf("redfish: media store: invalid image name %q", name)
	}
	tmp, err := os.CreateTemp(s.Dir, "."+name+".tmp-")
	if err != nil {
		return "", fmt.Errorf("redfish: media store: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, ctxReader{ctx, data}); err != nil {
		tmp.Close()
		return "", fmt.Errorf("redfish: media store: write %s: %w", name, err)
	}
	// The web server serving Dir reads the image.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("redfish: media store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("redfish: media store: write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.Dir, name)); err != nil {
		return "", fmt.Errorf("redfish: media store: %w", err)
	}
	return strings.TrimRight(s.BaseURL, "/") + "/" + name, nil
}

// Delete removes Dir/name.
func (s DirMediaStore) Delete(ctx context.Context, name string) error {
	if !mediaName.MatchString(name) {
		return fmt.Errorf("redfish: media store: invalid image name %q", name)
	}
	if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("redfish: media store: %w", err)
	}
	return nil
}

// ParamsLabel is the volume label of the ramdisk parameters image; IPA
// looks for parameters.txt on the virtual media device with this label
// when its kernel command line says boot_method=vmedia.
const ParamsLabel = "ir-vfd-dev"

// ParamsFile is the name of the parameters file on the image.
const ParamsFile = "parameters.txt"

// paramsText renders ramdisk parameters as IPA reads parameters.txt:
// key=value tokens separated by whitespace, here one per line and sorted.
// boot_method=vmedia is always included. A value with whitespace cannot be
// expressed and is refused.
func paramsText(params map[string]any, extra []string) (string, error) {
	lines := []string{"boot_method=vmedia"}
	for k, v := range params {
		s := fmt.Sprint(v)
		if k == "" || strings.ContainsAny(k, " \t\r\n=") || strings.ContainsAny(s, " \t\r\n") {
			return "", fmt.Errorf("ramdisk parameter %q=%q cannot be passed on virtual media (no whitespace or = in keys, no whitespace in values)", k, s)
		}
		if k == "boot_method" {
			continue
		}
		lines = append(lines, k+"="+s)
	}
	sort.Strings(lines[1:])
	lines = append(lines, extra...)
	return strings.Join(lines, "\n") + "\n", nil
}

// paramsImage builds the ISO 9660 image labelled ParamsLabel holding
// ParamsFile with text.
func paramsImage(text string) ([]byte, error) {
	scratch, err := os.MkdirTemp("", "anvil-redfish-params-")
	if err != nil {
		return nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	defer os.RemoveAll(scratch)
	tree := filepath.Join(scratch, "tree")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tree, ParamsFile), []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	imgPath := filepath.Join(scratch, "params.iso")
	out, err := os.OpenFile(imgPath, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	defer out.Close()
	fs, err := iso9660.Create(file.New(out, false), 0, 0, 2048, tree)
	if err != nil {
		return nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: ParamsLabel}); err != nil {
		return nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	return os.ReadFile(imgPath)
}

// ReadParamsImage returns the volume label and the parameters of a
// parameters image, parsed as IPA parses parameters.txt. It is meant for
// tests and tools.
func ReadParamsImage(img []byte) (label string, params map[string]string, err error) {
	scratch, err := os.CreateTemp("", "anvil-redfish-params-read-")
	if err != nil {
		return "", nil, err
	}
	defer os.Remove(scratch.Name())
	defer scratch.Close()
	if _, err := scratch.Write(img); err != nil {
		return "", nil, err
	}
	fs, err := iso9660.Read(file.New(scratch, true), int64(len(img)), 0, 2048)
	if err != nil {
		return "", nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	b, err := fs.ReadFile(ParamsFile)
	if err != nil {
		return "", nil, fmt.Errorf("redfish: parameters image: %w", err)
	}
	b = b[:min(len(b), 64<<10)]
	params = map[string]string{}
	for _, tok := range strings.Fields(string(b)) {
		if k, v, ok := strings.Cut(tok, "="); ok {
			params[k] = v
		}
	}
	return strings.TrimRight(fs.Label(), "\x00 "), params, nil
}
