package tftp

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		name    string
		p       []byte
		want    *request
		wantErr bool
	}{
		{"plain", rrq(opRRQ, "pxelinux.0", "octet"), &request{op: opRRQ, filename: "pxelinux.0", mode: "octet"}, false},
		{"wrq", rrq(opWRQ, "x", "NetASCII"), &request{op: opWRQ, filename: "x", mode: "netascii"}, false},
		{"options", rrq(opRRQ, "f", "octet", "BLKSIZE", "1428", "tsize", "0"), &request{
			op: opRRQ, filename: "f", mode: "octet",
			options: map[string]string{"blksize": "1428", "tsize": "0"}, order: []string{"blksize", "tsize"},
		}, false},
		{"empty-value", rrq(opRRQ, "f", "octet", "x", ""), &request{
			op: opRRQ, filename: "f", mode: "octet", options: map[string]string{"x": ""}, order: []string{"x"},
		}, false},
		{"short", []byte{0}, nil, true},
		{"data", []byte{0, 3, 0, 1}, nil, true},
		{"no-nul", []byte{0, 1, 'f'}, nil, true},
		{"no-mode", rrq(opRRQ, "f"), nil, true},
		{"odd-option", rrq(opRRQ, "f", "octet", "blksize"), nil, true},
		{"empty-option-name", rrq(opRRQ, "f", "octet", "", "1"), nil, true},
		{"empty-filename", rrq(opRRQ, "", "octet"), nil, true},
		{"repeated", rrq(opRRQ, "f", "octet", "tsize", "0", "TSize", "0"), nil, true},
		{"513-bytes", rrq(opRRQ, strings.Repeat("a", 513-9), "octet"), nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseRequest(c.p)
			if c.wantErr {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("parseRequest: %v, %+v; want errMalformed", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.op != c.want.op || got.filename != c.want.filename || got.mode != c.want.mode ||
				!maps.Equal(got.options, c.want.options) || !slices.Equal(got.order, c.want.order) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := parseRequest(rrq(opRRQ, strings.Repeat("a", 512-9), "octet")); err != nil {
		t.Errorf("a 512-byte request: %v", err)
	}
}

func TestCleanFilename(t *testing.T) {
	ok := map[string]string{
		"pxelinux.0":                 "pxelinux.0",
		"/pxelinux.0":                "pxelinux.0",
		"///a//b/./c":                "a/b/c",
		`boot\x64\wdsnbp.com`:        "boot/x64/wdsnbp.com",
		`\boot\bcd`:                  "boot/bcd",
		"pxelinux.cfg/01-52-54-00-a": "pxelinux.cfg/01-52-54-00-a",
		"a/b/":                       "a/b",
		"..a/b..":                    "..a/b..",
		"ünïcode":                    "ünïcode",
	}
	for in, want := range ok {
		got, err := cleanFilename(in)
		if err != nil || got != want {
			t.Errorf("cleanFilename(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"..", "../etc/passwd", "/../x", "a/../../x", "a/../b", `..\x`, `a\..\..\x`, `a\..`,
		"", "/", ".", "./", `\`, "a\x00b", "a\nb", "x\x7f",
	} {
		if got, err := cleanFilename(in); !errors.Is(err, ErrAccess) {
			t.Errorf("cleanFilename(%q) = %q, %v; want ErrAccess", in, got, err)
		}
	}
}

func TestParsePacket(t *testing.T) {
	if pk, err := parsePacket([]byte{0, 4, 0xff, 0xfe}, 0); err != nil || pk.op != opACK || pk.block != 65534 {
		t.Errorf("ACK: %+v, %v", pk, err)
	}
	if pk, err := parsePacket([]byte{0, 3, 0, 9, 1, 2, 3}, 3); err != nil || pk.block != 9 || !bytes.Equal(pk.data, []byte{1, 2, 3}) {
		t.Errorf("DATA: %+v, %v", pk, err)
	}
	if _, err := parsePacket([]byte{0, 3, 0, 9, 1, 2, 3}, 2); !errors.Is(err, errMalformed) {
		t.Errorf("DATA over the block size: %v", err)
	}
	if pk, err := parsePacket([]byte{0, 5, 0, 1, 'n', 'o', 0}, 0); err != nil || pk.code != ErrCodeNotFound || pk.message != "no" {
		t.Errorf("ERROR: %+v, %v", pk, err)
	}
	if pk, err := parsePacket([]byte{0, 5, 0, 2, 'n', 'o'}, 0); err != nil || pk.message != "no" {
		t.Errorf("ERROR without NUL: %+v, %v", pk, err)
	}
	if pk, err := parsePacket(append([]byte{0, 6}, "BlkSize\x00512\x00tsize\x009\x00"...), 0); err != nil ||
		!maps.Equal(pk.options, map[string]string{"blksize": "512", "tsize": "9"}) {
		t.Errorf("OACK: %+v, %v", pk, err)
	}
	for _, p := range [][]byte{{}, {0}, {0, 4, 1}, {0, 1, 'a', 0}, {0, 6, 'a', 0}, {0, 6, 'a'}, {0, 9, 0, 0}} {
		if _, err := parsePacket(p, 512); !errors.Is(err, errMalformed) {
			t.Errorf("parsePacket(% x): %v, want errMalformed", p, err)
		}
	}
}

func TestParseUint(t *testing.T) {
	for _, c := range []struct {
		s      string
		v      int64
		wantOK bool
	}{
		{"0", 0, true}, {"255", 255, true}, {"007", 7, true}, {"", 0, false}, {"-1", 0, false},
		{"+1", 0, false}, {" 1", 0, false}, {"1e3", 0, false}, {"99999999999999999999", 0, false}, {"256", 0, false},
	} {
		if v, ok := parseUint(c.s, 0, 255); ok != c.wantOK || (ok && v != c.v) {
			t.Errorf("parseUint(%q) = %d, %v", c.s, v, ok)
		}
	}
}

func TestNetascii(t *testing.T) {
	cases := map[string]string{
		"":               "",
		"a\nb":           "a\r\nb",
		"a\r\nb":         "a\r\x00\r\nb",
		"a\rb":           "a\r\x00b",
		"\n\n\r":         "\r\n\r\n\r\x00",
		"no line ending": "no line ending",
	}
	for in, want := range cases {
		// A one-byte reader and one-byte reads exercise the carry.
		enc, err := io.ReadAll(iotest.OneByteReader(newNetasciiReader(iotest.OneByteReader(strings.NewReader(in)))))
		if err != nil || string(enc) != want {
			t.Errorf("encode %q = %q, %v; want %q", in, enc, err, want)
		}
		var out bytes.Buffer
		w := &netasciiWriter{w: &out}
		for i := range len(want) { // one byte per write: the CR may end a block
			if _, err := w.Write([]byte{want[i]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.flush(); err != nil || out.String() != in || w.written != int64(len(in)) {
			t.Errorf("decode %q = %q (%d), %v; want %q", want, out.String(), w.written, err, in)
		}
	}
	// A lone CR that is not netascii's is kept.
	var out bytes.Buffer
	w := &netasciiWriter{w: &out}
	_, _ = w.Write([]byte("a\rb\r"))
	_ = w.flush()
	if out.String() != "a\rb\r" {
		t.Errorf("lone CRs decoded to %q", out.String())
	}
}
