package ironicapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// configDriveArg is the configdrive field of a provision body. A JSON
// string, the form a large image comes in, is unescaped into a temporary
// file as it arrives (with its shape noted on the way) and is never held
// in memory; any other value is kept raw.
type configDriveArg struct {
	raw  json.RawMessage
	file *os.File
	size int64
	// url: the string holds "://"; nonB64: it holds a byte outside
	// b64Alphabet.
	url, nonB64 bool
}

// empty reports whether the config drive is absent, null, "" or {}.
func (a *configDriveArg) empty() bool {
	if a.file != nil {
		return a.size == 0
	}
	return emptyConfigDrive(a.raw)
}

// close removes the temporary file, if any.
func (a *configDriveArg) close() {
	if a.file != nil {
		_ = a.file.Close()
		_ = os.Remove(a.file.Name())
		a.file = nil
	}
}

// provisionScanner reads a provision body as a stream: the top-level
// object by hand, each small value captured raw, the configdrive string
// straight to a file.
type provisionScanner struct {
	br      *bufio.Reader
	tempDir string
}

// errBadJSON is a syntax error of the body; the scanner's callers turn
// it into Ironic's 400.
type errBadJSON struct{ msg string }

func (e *errBadJSON) Error() string { return e.msg }

func syntaxErr(format string, args ...any) error {
	return &errBadJSON{msg: fmt.Sprintf(format, args...)}
}

// readProvisionBody decodes the provision body of rq: the fields but
// configdrive in doc (raw), the configdrive in cd, whose file the caller
// closes (cd.close) on every path. An empty or malformed body is a 400,
// an oversized one a 413, an unknown key a 400 naming it.
func (rq *request) readProvisionBody(cd *configDriveArg) (map[string]json.RawMessage, error) {
	s := &provisionScanner{br: bufio.NewReaderSize(rq.r.Body, 64<<10), tempDir: rq.h.opts.TempDir}
	doc, unknown, err := s.object(cd)
	if err == nil {
		// Only white space may follow the document.
		if err = s.ws(); err == nil {
			err = syntaxErr("data after the document.")
		} else if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		var bad *errBadJSON
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge(mbe.Limit)
		case errors.As(err, &bad):
			return nil, badRequest("Invalid JSON in the request body: %s", bad.msg)
		case errors.Is(err, errEmptyBody):
			return nil, badRequest("The request body is empty; a JSON document was expected.")
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, badRequest("Invalid JSON in the request body: unexpected EOF")
		}
		// A read failure (the client went away) or the temporary file.
		return nil, fmt.Errorf("ironicapi: read provision body: %w", err)
	}
	if unknown != "" {
		return nil, badRequest("Unknown argument: \"%s\"", unknown)
	}
	return doc, nil
}

var errEmptyBody = errors.New("empty body")

// ws skips white space; it returns the reader's error (io.EOF at the
// end) or nil with the next byte unread.
func (s *provisionScanner) ws() error {
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			return err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return s.br.UnreadByte()
	}
}

// next skips white space and reads one byte; the end of the body is
// io.ErrUnexpectedEOF.
func (s *provisionScanner) next() (byte, error) {
	if err := s.ws(); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return s.br.ReadByte()
}

// object reads the top-level object (or null), returning its fields
// and the first unknown key.
func (s *provisionScanner) object(cd *configDriveArg) (map[string]json.RawMessage, string, error) {
	doc := map[string]json.RawMessage{}
	unknown := ""
	if err := s.ws(); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, "", errEmptyBody
		}
		return nil, "", err
	}
	c, err := s.br.ReadByte()
	if err != nil {
		return nil, "", err
	}
	if c != '{' {
		_ = s.br.UnreadByte()
		raw, err := s.value(nil)
		if err != nil {
			return nil, "", err
		}
		if string(raw) == "null" {
			return doc, "", nil
		}
		return nil, "", syntaxErr("the document is not an object.")
	}
	if c, err = s.next(); err != nil {
		return nil, "", err
	}
	if c == '}' {
		return doc, "", nil
	}
	for {
		if c != '"' {
			return nil, "", syntaxErr("expected a key, found %q.", c)
		}
		_ = s.br.UnreadByte()
		rawKey, err := s.value(nil)
		if err != nil {
			return nil, "", err
		}
		var key string
		if err := json.Unmarshal(rawKey, &key); err != nil {
			return nil, "", syntaxErr("malformed key.")
		}
		if c, err = s.next(); err != nil {
			return nil, "", err
		}
		if c != ':' {
			return nil, "", syntaxErr("expected ':' after key %q.", truncateRaw(rawKey))
		}
		if err := s.ws(); err != nil {
			return nil, "", noEOF(err)
		}
		if key == "configdrive" {
			if err := s.configDrive(cd); err != nil {
				return nil, "", err
			}
		} else {
			raw, err := s.value(nil)
			var bad *errBadJSON
			if errors.As(err, &bad) {
				return nil, "", syntaxErr("malformed value of %q.", key)
			}
			if err != nil {
				return nil, "", err
			}
			if !provisionKeys[key] && unknown == "" {
				unknown = key
			}
			doc[key] = raw
		}
		if c, err = s.next(); err != nil {
			return nil, "", err
		}
		switch c {
		case '}':
			return doc, unknown, nil
		case ',':
			if c, err = s.next(); err != nil {
				return nil, "", err
			}
		default:
			return nil, "", syntaxErr("expected ',' or '}' after the value of %q.", key)
		}
	}
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// configDrive reads the configdrive value: a string into a temporary
// file, anything else raw. A later duplicate key replaces an earlier
// one, as decoding into a map does.
func (s *provisionScanner) configDrive(cd *configDriveArg) error {
	cd.close()
	*cd = configDriveArg{}
	b, err := s.br.Peek(1)
	if err != nil {
		return noEOF(err)
	}
	if b[0] != '"' {
		raw, err := s.value(nil)
		cd.raw = raw
		return err
	}
	_, _ = s.br.ReadByte()
	f, err := os.CreateTemp(s.tempDir, "anvil-configdrive-*")
	if err != nil {
		return err
	}
	cd.file = f
	w := bufio.NewWriterSize(f, 64<<10)
	var tail [2]byte
	put := func(c byte) error {
		if c == '/' && cd.size >= 2 && tail[0] == ':' && tail[1] == '/' {
			cd.url = true
		}
		if !cd.nonB64 && strings.IndexByte(b64Alphabet, c) < 0 {
			cd.nonB64 = true
		}
		tail[0], tail[1] = tail[1], c
		cd.size++
		return w.WriteByte(c)
	}
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			return noEOF(err)
		}
		switch {
		case c == '"':
			return w.Flush()
		case c < 0x20:
			return syntaxErr("invalid character %q in the configdrive string.", c)
		case c != '\\':
			if err := put(c); err != nil {
				return err
			}
			continue
		}
		e, err := s.br.ReadByte()
		if err != nil {
			return noEOF(err)
		}
		var r rune
		if c, ok := jsonexact.SimpleEscape(e); ok {
			r = rune(c)
		} else if e == 'u' {
			if r, err = s.hex4(); err != nil {
				return err
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if p, _ := s.br.Peek(2); string(p) == `\u` {
					_, _ = s.br.Discard(2)
					if r2, err = s.hex4(); err != nil {
						return err
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
		} else {
			return syntaxErr("invalid escape %q in the configdrive string.", "\\"+string(e))
		}
		var enc [utf8.UTFMax]byte
		for _, c := range enc[:utf8.EncodeRune(enc[:], r)] {
			if err := put(c); err != nil {
				return err
			}
		}
	}
}

// hex4 reads the four hex digits of a \u escape.
func (s *provisionScanner) hex4() (rune, error) {
	var h [4]byte
	if _, err := io.ReadFull(s.br, h[:]); err != nil {
		return 0, noEOF(err)
	}
	v, err := strconv.ParseUint(string(h[:]), 16, 16)
	if err != nil {
		return 0, syntaxErr("invalid escape \\u%s in the configdrive string.", h[:])
	}
	return rune(v), nil
}

// value reads one JSON value raw (appended to buf), checked with
// json.Valid.
func (s *provisionScanner) value(buf []byte) (json.RawMessage, error) {
	depth := 0
	inStr, esc := false, false
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && depth == 0 && !inStr && len(buf) > 0 {
				break
			}
			return nil, noEOF(err)
		}
		if inStr {
			buf = append(buf, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 0 {
					return checkRaw(buf)
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				_ = s.br.UnreadByte()
				return checkRaw(buf)
			}
			depth--
			if depth == 0 {
				return checkRaw(append(buf, c))
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				_ = s.br.UnreadByte()
				return checkRaw(buf)
			}
		}
		buf = append(buf, c)
	}
	return checkRaw(buf)
}

func checkRaw(raw []byte) (json.RawMessage, error) {
	if !json.Valid(raw) {
		// The value is not echoed: it may be a secret (rescue_password).
		return nil, syntaxErr("malformed value.")
	}
	return raw, nil
}
