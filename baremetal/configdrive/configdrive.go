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
	"net/url"
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
		// One decoding pass over the whole object: a config drive may be
		// tens of megabytes, and a second pass per field doubled the time
		// a request spent before an oversized one was refused.
		if lb := userDataLowerBound(trimmed) * len(versionDirs); lb > MaxSize {
			return Value{}, &Error{Field: "user_data", Reason: fmt.Sprintf("contents of at least %d bytes exceed %d bytes", lb, MaxSize), Err: ErrTooLarge}
		}
		var fields map[string]any
		if err := json.Unmarshal(trimmed, &fields); err != nil {
			return Value{}, invalid("", "expected a string or an object", err)
		}
		c := &Contents{}
		for k, v := range fields {
			switch k {
			case "meta_data", "network_data", "vendor_data":
				m, ok := v.(map[string]any)
				if !ok && v != nil {
					return Value{}, invalid(k, "expected an object", nil)
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
				switch v.(type) {
				case nil, string, map[string]any, []any:
					c.UserData = v
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

// userDataLowerBound returns, without decoding the object, a lower bound of
// the bytes the user_data file built from the contents object raw takes:
// the decoded length of a string user_data (its last occurrence, as
// decoding keeps the last of duplicate keys), counting every escape as one
// byte, the least it decodes to. A user_data of another type counts 0. It
// lets Parse refuse a config drive of tens of megabytes at the speed of a
// byte scan instead of a JSON decoding. On malformed input it returns 0
// and leaves the error to the decoder.
func userDataLowerBound(raw []byte) int {
	i := 0
	ws := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	// str scans the string starting at raw[i] == '"' and returns its
	// decoded length's lower bound; i ends after the closing quote.
	str := func() (int, bool) {
		n := 0
		for i++; i < len(raw); i++ {
			switch raw[i] {
			case '"':
				i++
				return n, true
			case '\\':
				// An escape decodes to at least one byte: skip it
				// whole (\uXXXX is six bytes).
				if i+1 < len(raw) && raw[i+1] == 'u' {
					i += 5
				} else {
					i++
				}
			}
			n++
		}
		return 0, false
	}
	// skip scans any value starting at raw[i].
	skip := func() bool {
		depth := 0
		for i < len(raw) {
			switch raw[i] {
			case '"':
				if _, ok := str(); !ok {
					return false
				}
				if depth == 0 {
					return true
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth < 0 {
					return false
				}
				if depth == 0 {
					i++
					return true
				}
			case ',', ' ', '\t', '\n', '\r', ':':
				if depth == 0 {
					return true
				}
			}
			i++
		}
		return depth == 0
	}
	ws()
	if i >= len(raw) || raw[i] != '{' {
		return 0
	}
	i++
	last := 0
	for {
		ws()
		if i >= len(raw) || raw[i] != '"' {
			return last
		}
		start := i
		if _, ok := str(); !ok {
			return 0
		}
		var key string
		if json.Unmarshal(raw[start:i], &key) != nil {
			return 0
		}
		ws()
		if i >= len(raw) || raw[i] != ':' {
			return 0
		}
		i++
		ws()
		if i >= len(raw) {
			return 0
		}
		if key == "user_data" {
			if raw[i] == '"' {
				n, ok := str()
				if !ok {
					return 0
				}
				last = n
			} else {
				last = 0
				if !skip() {
					return 0
				}
			}
		} else if !skip() {
			return 0
		}
		ws()
		if i >= len(raw) || raw[i] != ',' {
			return last
		}
		i++
	}
}

// ParseString classifies a string config drive: a URL (contains "://") or a
// base64 gzipped image, which is decoded to check it is one and that it fits
// in MaxSize. A URL must be http or https with a host, the schemes the
// agent downloads a config drive over; any other (file:///etc/passwd,
// ftp://, gopher://) is refused with an *Error matching ErrInvalid, where
// Ironic stores any string with "://" and the deploy fails later.
func ParseString(s string) (Value, error) {
	if s == "" {
		return Value{Kind: KindNone}, nil
	}
	if strings.Contains(s, "://") {
		if err := checkURL(s); err != nil {
			return Value{}, err
		}
		return Value{Kind: KindURL, Image: s}, nil
	}
	if err := checkImage(s, MaxSize); err != nil {
		return Value{}, err
	}
	return Value{Kind: KindImage, Image: s}, nil
}

// checkURL accepts an absolute http or https URL with a host. The error
// names the scheme only: the rest of the URL may carry credentials.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return invalid("", "expected an http or https URL (the URL does not parse)", nil)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return invalid("", fmt.Sprintf("expected an http or https URL, got scheme %q", u.Scheme), nil)
	}
	if u.Host == "" {
		return invalid("", "expected an http or https URL with a host", nil)
	}
	return nil
}

// Decode reverses the encoding of an image config drive: it base64-decodes
// s, decompresses it, and returns the ISO 9660 image, refusing more than
// MaxSize bytes.
func Decode(s string) ([]byte, error) { return decode(s, MaxSize) }

// gunzipper opens the gzip stream of a base64 encoded image.
func gunzipper(s string) (*gzip.Reader, error) { return gunzipReader(strings.NewReader(s)) }

// gunzipReader opens the gzip stream of the base64 text r yields,
// decoding it as it is read: the text is never held whole.
func gunzipReader(r io.Reader) (*gzip.Reader, error) {
	zr, err := gzip.NewReader(base64.NewDecoder(base64.StdEncoding, spaceDropper{r}))
	if err != nil {
		return nil, imageReadError(err)
	}
	return zr, nil
}

// imageReadError is the *Error of a failure reading an image's base64
// or gzip stream.
func imageReadError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// Not io's sentinel as the cause: callers read that as a lost
		// connection.
		err = errTruncated
	}
	var cie base64.CorruptInputError
	if errors.As(err, &cie) || errors.Is(err, gzip.ErrHeader) || err == errTruncated {
		return invalid("", "expected a base64 encoded gzipped ISO 9660 image or a URL", err)
	}
	return invalid("", "corrupt gzip stream", err)
}

// errTruncated is the cause of an image whose gzip stream ends early.
var errTruncated = errors.New("the gzip stream ends early")

// spaceDropper drops the white space base64 text is wrapped with.
type spaceDropper struct{ r io.Reader }

func (d spaceDropper) Read(p []byte) (int, error) {
	for {
		n, err := d.r.Read(p)
		j := 0
		for _, c := range p[:n] {
			switch c {
			case ' ', '\n', '\r', '\t':
			default:
				p[j] = c
				j++
			}
		}
		if j > 0 || err != nil || n == 0 {
			return j, err
		}
	}
}

// checkImage is decode without keeping the image: it decompresses into
// nothing, counting, so checking a request costs no image-sized buffer.
func checkImage(s string, limit int) error { return checkImageReader(strings.NewReader(s), limit) }

func checkImageReader(r io.Reader, limit int) error {
	zr, err := gunzipReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return imageReadError(err)
	}
	if n > int64(limit) {
		return &Error{Reason: fmt.Sprintf("decoded image exceeds %d bytes", limit), Err: ErrTooLarge}
	}
	return nil
}

// ParseText is ParseString for a string config drive read from text (the
// JSON string already unescaped), for a value too large to hold twice: an
// image is checked as it streams from text, and only a value that passes
// is read into the Value's Image, once. A text that fails is never held.
func ParseText(text io.ReadSeeker) (Value, error) {
	size, err := text.Seek(0, io.SeekEnd)
	if err != nil {
		return Value{}, fmt.Errorf("configdrive: read text: %w", err)
	}
	if _, err := text.Seek(0, io.SeekStart); err != nil {
		return Value{}, fmt.Errorf("configdrive: read text: %w", err)
	}
	if size == 0 {
		return Value{Kind: KindNone}, nil
	}
	// One pass both checks the image and looks for "://": a URL is
	// small, and is read whole and checked as ParseString does.
	f := &urlFinder{r: text}
	cerr := checkImageReader(f, MaxSize)
	if _, err := io.Copy(io.Discard, f); err != nil {
		return Value{}, fmt.Errorf("configdrive: read text: %w", err)
	}
	if !f.found && cerr != nil {
		return Value{}, cerr
	}
	if _, err := text.Seek(0, io.SeekStart); err != nil {
		return Value{}, fmt.Errorf("configdrive: read text: %w", err)
	}
	var b strings.Builder
	b.Grow(int(size))
	if _, err := io.Copy(&b, io.LimitReader(text, size)); err != nil {
		return Value{}, fmt.Errorf("configdrive: read text: %w", err)
	}
	s := b.String()
	if f.found {
		return ParseString(s)
	}
	return Value{Kind: KindImage, Image: s}, nil
}

// urlFinder passes r through, noting whether "://" went by.
type urlFinder struct {
	r     io.Reader
	tail  [2]byte
	n     int
	found bool
}

func (f *urlFinder) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	for _, c := range p[:n] {
		if !f.found && c == '/' && f.n >= 2 && f.tail[0] == ':' && f.tail[1] == '/' {
			f.found = true
		}
		f.tail[0], f.tail[1] = f.tail[1], c
		f.n++
	}
	return n, err
}

func decode(s string, limit int) ([]byte, error) {
	zr, err := gunzipper(s)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	img, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, imageReadError(err)
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
	if err := checkFiles(files, limit); err != nil {
		return "", err
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

// CheckSize refuses, with an *Error matching ErrTooLarge, contents for node
// whose files (written once per version directory) exceed MaxSize: the
// first check Build makes, without building anything, so a provision
// request can be refused before it is stored. It also refuses contents
// Build could not serialise. The built image is checked against MaxSize
// again by Build, since the ISO 9660 structures add a little.
func CheckSize(node Node, c Contents) error {
	files, err := renderFiles(node, c)
	if err != nil {
		return err
	}
	return checkFiles(files, MaxSize)
}

func checkFiles(files []driveFile, limit int) error {
	var total int
	for _, f := range files {
		total += len(f.data)
	}
	if total > limit {
		return &Error{Reason: fmt.Sprintf("contents of %d bytes exceed %d bytes", total, limit), Err: ErrTooLarge}
	}
	return nil
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
