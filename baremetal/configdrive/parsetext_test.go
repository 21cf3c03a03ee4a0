package configdrive_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/configdrive"
)

// TestParseTextAgreesWithParseString: ParseText, reading the string
// from a stream, classifies and refuses as ParseString does, and gives
// the same Value.
func TestParseTextAgreesWithParseString(t *testing.T) {
	gz := func(data []byte) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write(data)
		_ = w.Close()
		return base64.StdEncoding.EncodeToString(b.Bytes())
	}
	img := gz([]byte("an image"))
	var wrapped strings.Builder
	for i := 0; i < len(img); i += 8 {
		wrapped.WriteString(img[i:min(i+8, len(img))] + "\r\n ")
	}
	for _, tc := range []struct {
		name, s string
		kind    configdrive.Kind
		err     error
	}{
		{"empty", "", configdrive.KindNone, nil},
		{"image", img, configdrive.KindImage, nil},
		{"wrapped image", wrapped.String(), configdrive.KindImage, nil},
		{"url", "https://192.0.2.10/drive", configdrive.KindURL, nil},
		{"long url", "https://192.0.2.10/" + strings.Repeat("a", 70000), configdrive.KindURL, nil},
		{"base64 text then a url", strings.Repeat("A", 70000) + "http://192.0.2.10/x", 0, configdrive.ErrInvalid},
		{"file url", "file:///etc/passwd", 0, configdrive.ErrInvalid},
		{"not gzip", "AAAAAAAA", 0, configdrive.ErrInvalid},
		{"not base64", "no*base64", 0, configdrive.ErrInvalid},
		{"truncated gzip", img[:12], 0, configdrive.ErrInvalid},
		{"trailing garbage", img + "!!", 0, configdrive.ErrInvalid},
		{"too large", gz(make([]byte, configdrive.MaxSize+1)), 0, configdrive.ErrTooLarge},
	} {
		want, werr := configdrive.ParseString(tc.s)
		got, gerr := configdrive.ParseText(strings.NewReader(tc.s))
		if tc.err != nil {
			if !errors.Is(gerr, tc.err) || !errors.Is(werr, tc.err) {
				t.Errorf("%s: ParseText %v, ParseString %v, want %v", tc.name, gerr, werr, tc.err)
			}
			continue
		}
		if gerr != nil || werr != nil {
			t.Errorf("%s: ParseText %v, ParseString %v", tc.name, gerr, werr)
			continue
		}
		if got.Kind != tc.kind || want.Kind != tc.kind || got.Image != want.Image {
			t.Errorf("%s: ParseText kind %d (%d bytes), ParseString kind %d (%d bytes), want kind %d",
				tc.name, got.Kind, len(got.Image), want.Kind, len(want.Image), tc.kind)
		}
	}
}
