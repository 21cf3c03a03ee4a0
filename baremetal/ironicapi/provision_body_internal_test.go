package ironicapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"unicode/utf8"
)

// FuzzProvisionScanner: the hand-rolled provision body scanner accepts
// what encoding/json accepts as an object (or null) and nothing else,
// and yields the same fields and the same configdrive string.
func FuzzProvisionScanner(f *testing.F) {
	for _, s := range []string{
		`{"target":"active","configdrive":"QUFB\nQQ==\/\u002b"}`,
		`{"target":"active","configdrive":{"user_data":"x","meta_data":{"a":[1,2,{"b":null}]}}}`,
		`{"configdrive":"a","configdrive":"b"}`, `{"configdrive":"a","configdrive":null}`,
		`null`, `{}`, ` { "target" : "clean" , "clean_steps" : [ ] } `, `{"target":"x"} {}`,
		`{"target":"active","configdrive":"\ud83d\ude00\ud800x"}`, `[1]`, `"x"`, `{"a":1,}`, `{"a" 1}`,
		`{"a":tru}`, `{"a":1e5,"b":-0.5,"c":false}`, `{"configdrive":"\"\\\b\f\n\r\t"}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		if !utf8.Valid(in) {
			return // encoding/json replaces invalid UTF-8; the scanner keeps it.
		}
		s := &provisionScanner{br: bufio.NewReader(bytes.NewReader(in)), tempDir: dir}
		var cd configDriveArg
		defer cd.close()
		doc, _, err := s.object(&cd)
		if err == nil {
			if err = s.ws(); err == nil {
				err = syntaxErr("data after the document.")
			} else if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		var want map[string]json.RawMessage
		werr := json.Unmarshal(in, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: scanner %v, encoding/json %v", in, err, werr)
		}
		if err != nil {
			return
		}
		var wantCD *string
		if raw, ok := want["configdrive"]; ok {
			var s string
			if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
				wantCD = &s
			} else if !bytes.Equal(cd.raw, raw) {
				t.Fatalf("%q: configdrive raw %q, want %q", in, cd.raw, raw)
			}
			delete(want, "configdrive")
		}
		if wantCD != nil {
			if cd.file == nil {
				t.Fatalf("%q: configdrive string not spooled", in)
			}
			got, rerr := os.ReadFile(cd.file.Name())
			if rerr != nil || string(got) != *wantCD || cd.size != int64(len(got)) {
				t.Fatalf("%q: spooled %q (%d, %v), want %q", in, got, cd.size, rerr, *wantCD)
			}
		} else if cd.file != nil {
			t.Fatalf("%q: spooled a configdrive that is not a string", in)
		}
		if len(doc) != len(want) {
			t.Fatalf("%q: fields %q, want %q", in, doc, want)
		}
		for k, raw := range want {
			if !bytes.Equal(doc[k], raw) {
				t.Fatalf("%q: field %s = %q, want %q", in, k, doc[k], raw)
			}
		}
	})
}
