package tftp

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseRequest: any input either fails as malformed or parses into a
// request within the bounds that encodes back to the same request; a
// parsed filename either is refused or cleans to a safe relative name.
func FuzzParseRequest(f *testing.F) {
	f.Add(rrq(opRRQ, "pxelinux.0", "octet"))
	f.Add(rrq(opRRQ, "/boot/x", "netascii", "blksize", "1468", "tsize", "0", "timeout", "3", "windowsize", "16"))
	f.Add(rrq(opWRQ, `..\..\x`, "OCTET", "BLKSIZE", "8"))
	f.Add(rrq(opRRQ, "a", "octet", "x", "", "x", "1"))
	f.Add([]byte{0, 1, 0, 0})
	f.Add([]byte{0, 1, 'a', 0, 'b'})
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := parseRequest(p)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v does not wrap errMalformed", err)
			}
			return
		}
		if len(p) > maxRequestSize || len(r.options) > maxOptions || len(r.order) != len(r.options) || r.filename == "" {
			t.Fatalf("out of bounds: %d bytes, %+v", len(p), r)
		}
		again, err := parseRequest(encodeRequest(r.op, r.filename, r.mode, r.order, r.options))
		if err != nil || again.op != r.op || again.filename != r.filename || again.mode != r.mode ||
			!maps.Equal(again.options, r.options) || !slices.Equal(again.order, r.order) {
			t.Fatalf("re-encoded %+v parsed as %+v, %v", r, again, err)
		}
		checkClean(t, r.filename)
	})
}

// FuzzCleanFilename: a cleaned name is relative, clean, free of ".."
// elements, backslashes and control characters; anything else is
// ErrAccess.
func FuzzCleanFilename(f *testing.F) {
	for _, s := range []string{"pxelinux.0", "/../x", `a\..\..\x`, "a/./b//c", "..", "...", "a/..b", "\x00", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) { checkClean(t, name) })
}

func checkClean(t *testing.T, name string) {
	t.Helper()
	got, err := cleanFilename(name)
	if err != nil {
		if !errors.Is(err, ErrAccess) {
			t.Fatalf("cleanFilename(%q): %v is not ErrAccess", name, err)
		}
		return
	}
	if got == "" || got[0] == '/' || path.Clean(got) != got || strings.Contains(got, `\`) {
		t.Fatalf("cleanFilename(%q) = %q is not a clean relative name", name, got)
	}
	for _, el := range strings.Split(got, "/") {
		if el == ".." || el == "." {
			t.Fatalf("cleanFilename(%q) = %q has element %q", name, got, el)
		}
	}
	for i := 0; i < len(got); i++ {
		if got[i] < 0x20 || got[i] == 0x7f {
			t.Fatalf("cleanFilename(%q) = %q has a control character", name, got)
		}
	}
}

// FuzzParsePacket: the client's and the transfers' parser never panics,
// and what it returns stays within its bounds.
func FuzzParsePacket(f *testing.F) {
	f.Add([]byte{0, 3, 0, 1, 'd', 'a', 't', 'a'}, 512)
	f.Add([]byte{0, 4, 0xff, 0xff}, 0)
	f.Add([]byte{0, 5, 0, 1, 'n', 'o', 't', 0}, 0)
	f.Add(append([]byte{0, 6}, "blksize\x001468\x00tsize\x0099\x00"...), 512)
	f.Add([]byte{0, 6, 'a', 0}, 512)
	f.Fuzz(func(t *testing.T, p []byte, maxData int) {
		maxData = max(0, maxData%70000)
		pk, err := parsePacket(p, maxData)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v does not wrap errMalformed", err)
			}
			return
		}
		switch pk.op {
		case opDATA:
			if len(pk.data) > maxData {
				t.Fatalf("DATA of %d bytes over %d", len(pk.data), maxData)
			}
		case opERROR:
			if len(pk.message) > 255*3 || !utf8.ValidString(pk.message) {
				t.Fatalf("ERROR message %q unbounded or not UTF-8", pk.message)
			}
		case opOACK:
			if len(pk.options) > maxOptions {
				t.Fatalf("%d OACK options", len(pk.options))
			}
			c := &getter{opts: ClientOptions{BlockSize: 1468, WindowSize: 8, TSize: true, TimeoutOption: 2}}
			res := Result{}
			if c.accept(pk.options, &res) == nil && (res.BlockSize > 1468 || res.WindowSize > 8 || res.TSize < 0) {
				t.Fatalf("accepted OACK %v into %+v beyond what was asked", pk.options, res)
			}
		case opACK:
		default:
			t.Fatalf("opcode %d returned", pk.op)
		}
	})
}

// FuzzNetascii: decoding what was encoded gives the input back, whatever
// the block boundaries.
func FuzzNetascii(f *testing.F) {
	f.Add([]byte("a\nb\r\nc\rd\r"), 3)
	f.Add([]byte{'\r', 0, '\r', '\n'}, 1)
	f.Fuzz(func(t *testing.T, in []byte, chunk int) {
		chunk = 1 + max(0, chunk%600)
		enc, err := io.ReadAll(newNetasciiReader(bytes.NewReader(in)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w := &netasciiWriter{w: &out}
		for b := enc; len(b) > 0; {
			n := min(chunk, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if err := w.flush(); err != nil || !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("%q encoded %q decoded %q", in, enc, out.Bytes())
		}
	})
}
