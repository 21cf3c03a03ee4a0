package configdrive

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// Label is the ISO 9660 volume identifier of every config drive; cloud-init
// and the agent find the drive by it.
const Label = "config-2"

// MaxSize is the largest decoded config drive image accepted, in bytes
// (Ironic's MAX_CONFIG_DRIVE_SIZE_MB, 64 MiB).
const MaxSize = 64 << 20

// versionDirs are the metadata version directories written into the image,
// as Ironic's builder does.
var versionDirs = [...]string{"openstack/2012-08-10", "openstack/latest"}

// ErrInvalid is matched (errors.Is) by every rejection of config drive input.
var ErrInvalid = errors.New("configdrive: invalid config drive")

// ErrTooLarge is matched (errors.Is) when a config drive image exceeds MaxSize.
var ErrTooLarge = errors.New("configdrive: config drive too large")

// Error is a rejected config drive: Field names the offending part of the
// input (empty for the whole value) and Reason says what was expected.
type Error struct {
	Field  string
	Reason string
	Err    error // ErrInvalid or ErrTooLarge
	Cause  error // an underlying decoding error, if any
}

// Error implements error.
func (e *Error) Error() string {
	msg := "configdrive: "
	if e.Field != "" {
		msg += e.Field + ": "
	}
	msg += e.Reason
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is reports whether target is the sentinel this error belongs to.
func (e *Error) Is(target error) bool { return target == e.Err }

// Unwrap returns the underlying decoding error, if any.
func (e *Error) Unwrap() error { return e.Cause }

func invalid(field, reason string, cause error) error {
	return &Error{Field: field, Reason: reason, Err: ErrInvalid, Cause: cause}
}

// Contents is the dictionary form of a config drive, as accepted by the
// provision API: every field is optional.
type Contents struct {
	// MetaData becomes meta_data.json; uuid and name default to the node's.
	MetaData map[string]any `json:"meta_data,omitempty"`
	// NetworkData becomes network_data.json when set.
	NetworkData map[string]any `json:"network_data,omitempty"`
	// UserData becomes user_data: a string is written as is, anything else
	// (object or array) as JSON.
	UserData any `json:"user_data,omitempty"`
	// VendorData becomes vendor_data2.json when set.
	VendorData map[string]any `json:"vendor_data,omitempty"`
}

// Kind says which form a config drive value has.
type Kind int

// The forms a config drive value can take.
const (
	// KindNone is an absent config drive.
	KindNone Kind = iota
	// KindImage is a base64 encoded, gzip compressed ISO 9660 image.
	KindImage
	// KindURL is a URL the agent downloads the image from.
	KindURL
	// KindContents is a dictionary to build an image from.
	KindContents
)

// Value is a parsed config drive as a provision request carries it: exactly
// one of Image (for KindImage or KindURL) and Contents (for KindContents) is
// meaningful.
type Value struct {
	Kind     Kind
	Image    string
	Contents *Contents
}

// Parse classifies and validates raw, the JSON value of a provision
// request's configdrive field: null, a string (a base64 gzipped image or a
// URL), or an object with only meta_data, network_data, user_data and
// vendor_data.
func Parse(raw json.RawMessage) (Value, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return Value{Kind: KindNone}, nil
	}
	switch trimmed[0] {
	case '"':
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return Value{}, invalid("", "expected a string or an object", err)
		}
		return ParseString(s)
	case '{':
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &fields); err != nil {
			return Value{}, invalid("", "expected a string or an object", err)
		}
		c := &Contents{}
		for k, v := range fields {
			switch k {
			case "meta_data", "network_data", "vendor_data":
				m, err := decodeObject(k, v)
				if err != nil {
					return Value{}, err
				}
				switch k {
				case "meta_data":
					c.MetaData = m
				case "network_data":
					c.NetworkData = m
				default:
					c.VendorData = m
				}
			case "user_data":
				var ud any
				if err := json.Unmarshal(v, &ud); err != nil {
					return Value{}, invalid(k, "expected an object, an array, a string or null", err)
				}
				switch ud.(type) {
				case nil, string, map[string]any, []any:
					c.UserData = ud
				default:
					return Value{}, invalid(k, "expected an object, an array, a string or null", nil)
				}
			default:
				return Value{}, invalid(k, "unexpected key; allowed are meta_data, network_data, user_data and vendor_data", nil)
			}
		}
		return Value{Kind: KindContents, Contents: c}, nil
	default:
		return Value{}, invalid("", "expected a string or an object", nil)
	}
}

func decodeObject(field string, v json.RawMessage) (map[string]any, error) {
	t := bytes.TrimSpace(v)
	if string(t) == "null" {
		return nil, nil
	}
	if len(t) == 0 || t[0] != '{' {
		return nil, invalid(field, "expected an object", nil)
	}
	var m map[string]any
	if err := json.Unmarshal(t, &m); err != nil {
		return nil, invalid(field, "expected an object", err)
	}
	return m, nil
}

// ParseString classifies a string config drive: a URL (contains "://") or a
// base64 gzipped image, which is decoded to check it is one and that it fits
// in MaxSize.
func ParseString(s string) (Value, error) {
	if s == "" {
		return Value{Kind: KindNone}, nil
	}
	if strings.Contains(s, "://") {
		return Value{Kind: KindURL, Image: s}, nil
	}
	if _, err := Decode(s); err != nil {
		return Value{}, err
	}
	return Value{Kind: KindImage, Image: s}, nil
}

// Decode reverses the encoding of an image config drive: it base64-decodes
// s, decompresses it, and returns the ISO 9660 image, refusing more than
// MaxSize bytes.
func Decode(s string) ([]byte, error) { return decode(s, MaxSize) }

func decode(s string, limit int) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\r', '\t':
			return -1
		}
		return r
	}, s)
	gz, err := base64.StdEncoding.DecodeString(clean)
	if err != nil {
		return nil, invalid("", "expected a base64 encoded gzipped ISO 9660 image or a URL", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, invalid("", "expected a base64 encoded gzipped ISO 9660 image or a URL", err)
	}
	defer zr.Close()
	img, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, invalid("", "corrupt gzip stream", err)
	}
	if len(img) > limit {
		return nil, &Error{Reason: fmt.Sprintf("decoded image exceeds %d bytes", limit), Err: ErrTooLarge}
	}
	return img, nil
}

// Node identifies the node a config drive is built for; its UUID and name
// are the meta_data defaults.
type Node struct {
	UUID string
	Name string
}

// Build renders c into a config drive for node: an ISO 9660 image labelled
// config-2 holding openstack/{2012-08-10,latest}/{meta_data.json,
// network_data.json,vendor_data2.json,user_data}, gzip compressed and base64
// encoded. It refuses an image larger than MaxSize. Build writes scratch
// files in a private temporary directory that it removes before returning.
func Build(ctx context.Context, node Node, c Contents) (string, error) {
	return build(ctx, node, c, MaxSize)
}

func build(ctx context.Context, node Node, c Contents, limit int) (string, error) {
	files, err := renderFiles(node, c)
	if err != nil {
		return "", err
	}
	var total int
	for _, f := range files {
		total += len(f.data)
	}
	if total > limit {
		return "", &Error{Reason: fmt.Sprintf("contents exceed %d bytes", limit), Err: ErrTooLarge}
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("configdrive: %w", err)
	}
	img, err := buildISO(files)
	if err != nil {
		return "", err
	}
	if len(img) > limit {
		return "", &Error{Reason: fmt.Sprintf("image of %d bytes exceeds %d bytes", len(img), limit), Err: ErrTooLarge}
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(img); err != nil {
		return "", fmt.Errorf("configdrive: compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("configdrive: compress: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

type driveFile struct {
	path string
	data []byte
}

func renderFiles(node Node, c Contents) ([]driveFile, error) {
	meta := make(map[string]any, len(c.MetaData)+2)
	if node.UUID != "" {
		meta["uuid"] = node.UUID
	}
	if node.Name != "" {
		meta["name"] = node.Name
	}
	for k, v := range c.MetaData {
		meta[k] = v
	}
	type named struct {
		name string
		data []byte
	}
	var entries []named
	mj, err := json.Marshal(meta)
	if err != nil {
		return nil, invalid("meta_data", "not serialisable as JSON", err)
	}
	entries = append(entries, named{"meta_data.json", mj})
	if c.NetworkData != nil {
		b, err := json.Marshal(c.NetworkData)
		if err != nil {
			return nil, invalid("network_data", "not serialisable as JSON", err)
		}
		entries = append(entries, named{"network_data.json", b})
	}
	if c.VendorData != nil {
		b, err := json.Marshal(c.VendorData)
		if err != nil {
			return nil, invalid("vendor_data", "not serialisable as JSON", err)
		}
		entries = append(entries, named{"vendor_data2.json", b})
	}
	switch ud := c.UserData.(type) {
	case nil:
	case string:
		entries = append(entries, named{"user_data", []byte(ud)})
	case []byte:
		entries = append(entries, named{"user_data", ud})
	default:
		b, err := json.Marshal(ud)
		if err != nil {
			return nil, invalid("user_data", "not serialisable as JSON", err)
		}
		entries = append(entries, named{"user_data", b})
	}
	var files []driveFile
	for _, dir := range versionDirs {
		for _, e := range entries {
			files = append(files, driveFile{path: dir + "/" + e.name, data: e.data})
		}
	}
	return files, nil
}

func buildISO(files []driveFile) ([]byte, error) {
	scratch, err := os.MkdirTemp("", "anvil-configdrive-")
	if err != nil {
		return nil, fmt.Errorf("configdrive: scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	workspace := filepath.Join(scratch, "tree")
	for _, f := range files {
		p := filepath.Join(workspace, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, fmt.Errorf("configdrive: stage %s: %w", f.path, err)
		}
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("configdrive: stage %s: %w", f.path, err)
		}
	}
	imgPath := filepath.Join(scratch, "config-2.iso")
	out, err := os.OpenFile(imgPath, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("configdrive: image file: %w", err)
	}
	defer out.Close()
	fs, err := iso9660.Create(file.New(out, false), 0, 0, 2048, workspace)
	if err != nil {
		return nil, fmt.Errorf("configdrive: create ISO 9660: %w", err)
	}
	if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: Label}); err != nil {
		return nil, fmt.Errorf("configdrive: finalize ISO 9660: %w", err)
	}
	img, err := os.ReadFile(imgPath)
	if err != nil {
		return nil, fmt.Errorf("configdrive: read image: %w", err)
	}
	return img, nil
}

// ReadFiles opens a decoded config drive image and returns the files under
// openstack/latest by name, with the volume label. It is meant for tests and
// tools that want to look inside a config drive.
func ReadFiles(img []byte) (label string, files map[string][]byte, err error) {
	scratch, err := os.CreateTemp("", "anvil-configdrive-read-")
	if err != nil {
		return "", nil, fmt.Errorf("configdrive: scratch file: %w", err)
	}
	defer os.Remove(scratch.Name())
	defer scratch.Close()
	if _, err := scratch.Write(img); err != nil {
		return "", nil, fmt.Errorf("configdrive: scratch file: %w", err)
	}
	fs, err := iso9660.Read(file.New(scratch, true), int64(len(img)), 0, 2048)
	if err != nil {
		return "", nil, invalid("", "not an ISO 9660 image", err)
	}
	entries, err := fs.ReadDir("openstack/latest")
	if err != nil {
		return "", nil, invalid("", "no openstack/latest directory", err)
	}
	files = make(map[string][]byte, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile("openstack/latest/" + e.Name())
		if err != nil {
			return "", nil, fmt.Errorf("configdrive: read %s: %w", e.Name(), err)
		}
		files[e.Name()] = b
	}
	return strings.TrimRight(fs.Label(), " \x00"), files, nil
}
