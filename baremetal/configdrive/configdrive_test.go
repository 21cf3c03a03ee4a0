package configdrive_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/configdrive"
)

func TestBuildRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := configdrive.Contents{
		MetaData:    map[string]any{"hostname": "web-1", "name": "override"},
		NetworkData: map[string]any{"links": []any{map[string]any{"id": "eth0"}}},
		UserData:    "#cloud-config\npackages: [nginx]\n",
		VendorData:  map[string]any{"vendor": "anvil"},
	}
	enc, err := configdrive.Build(ctx, configdrive.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Name: "node-1"}, c)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	v, err := configdrive.ParseString(enc)
	if err != nil || v.Kind != configdrive.KindImage {
		t.Fatalf("ParseString(built) = %+v, %v; want an image", v, err)
	}
	img, err := configdrive.Decode(enc)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	label, files, err := configdrive.ReadFiles(img)
	if err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	if label != configdrive.Label {
		t.Errorf("label = %q, want %q", label, configdrive.Label)
	}
	var meta map[string]any
	if err := json.Unmarshal(files["meta_data.json"], &meta); err != nil {
		t.Fatalf("meta_data.json: %v (files %v)", err, keys(files))
	}
	if meta["uuid"] != "1be26c0b-03f2-4d2e-ae87-c02d7f33c123" || meta["name"] != "override" || meta["hostname"] != "web-1" {
		t.Errorf("meta_data = %v: want node uuid default and user keys winning", meta)
	}
	if got := string(files["user_data"]); got != c.UserData {
		t.Errorf("user_data = %q", got)
	}
	if !bytes.Contains(files["network_data.json"], []byte(`"eth0"`)) {
		t.Errorf("network_data.json = %s", files["network_data.json"])
	}
	if !bytes.Contains(files["vendor_data2.json"], []byte(`"anvil"`)) {
		t.Errorf("vendor_data2.json = %s", files["vendor_data2.json"])
	}
}

func TestBuildUserDataObjectAndDefaults(t *testing.T) {
	enc, err := configdrive.Build(context.Background(), configdrive.Node{UUID: "u-1"}, configdrive.Contents{UserData: map[string]any{"a": 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := configdrive.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	_, files, err := configdrive.ReadFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	if string(files["user_data"]) != `{"a":1}` {
		t.Errorf("user_data = %q, want JSON", files["user_data"])
	}
	if _, ok := files["network_data.json"]; ok {
		t.Errorf("network_data.json written although not given")
	}
	if string(files["meta_data.json"]) != `{"uuid":"u-1"}` {
		t.Errorf("meta_data.json = %s", files["meta_data.json"])
	}
}

func TestParse(t *testing.T) {
	gz := func(b []byte) string {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	tests := []struct {
		name    string
		raw     string
		kind    configdrive.Kind
		wantErr error
		field   string
	}{
		{"null", `null`, configdrive.KindNone, nil, ""},
		{"empty", ``, configdrive.KindNone, nil, ""},
		{"url", `"http://example.com/cd.iso"`, configdrive.KindURL, nil, ""},
		{"image", `"` + gz([]byte("iso")) + `"`, configdrive.KindImage, nil, ""},
		{"dict", `{"meta_data":{"a":"b"},"user_data":["x"]}`, configdrive.KindContents, nil, ""},
		{"not base64", `"!!!"`, 0, configdrive.ErrInvalid, ""},
		{"not gzip", `"` + base64.StdEncoding.EncodeToString([]byte("plain")) + `"`, 0, configdrive.ErrInvalid, ""},
		{"number", `42`, 0, configdrive.ErrInvalid, ""},
		{"unknown key", `{"foo":{}}`, 0, configdrive.ErrInvalid, "foo"},
		{"meta not object", `{"meta_data":"x"}`, 0, configdrive.ErrInvalid, "meta_data"},
		{"user_data number", `{"user_data":3}`, 0, configdrive.ErrInvalid, "user_data"},
		{"https url", `"HTTPS://10.0.0.1:8080/cd.iso?x=1"`, configdrive.KindURL, nil, ""},
		{"url with credentials", `"http://u:p@10.0.0.1/cd.iso"`, configdrive.KindURL, nil, ""},
		{"file url", `"file:///etc/passwd"`, 0, configdrive.ErrInvalid, ""},
		{"ftp url", `"ftp://10.0.0.1/cd.iso"`, 0, configdrive.ErrInvalid, ""},
		{"gopher url", `"gopher://10.0.0.1/cd"`, 0, configdrive.ErrInvalid, ""},
		{"url without host", `"http:///cd.iso"`, 0, configdrive.ErrInvalid, ""},
		{"scheme-less ://", `"://x"`, 0, configdrive.ErrInvalid, ""},
		{"user_data over the limit", `{"user_data":"` + strings.Repeat("x", configdrive.MaxSize/2+1) + `"}`, 0, configdrive.ErrTooLarge, "user_data"},
		{"user_data at the limit", `{"user_data":"` + strings.Repeat("x", configdrive.MaxSize/2) + `"}`, configdrive.KindContents, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := configdrive.Parse(json.RawMessage(tt.raw))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				var ce *configdrive.Error
				if !errors.As(err, &ce) || ce.Field != tt.field {
					t.Fatalf("err = %#v, want *Error with field %q", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if v.Kind != tt.kind {
				t.Fatalf("kind = %v, want %v", v.Kind, tt.kind)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"meta_data":{"a":1}}`))
	f.Add([]byte(`"H4sIAAAAAAAA/w=="`))
	f.Add([]byte(`"https://x"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := configdrive.Parse(raw)
		if err != nil {
			var ce *configdrive.Error
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if v.Kind == configdrive.KindURL && !strings.Contains(v.Image, "://") {
			t.Fatalf("url without scheme: %q", v.Image)
		}
	})
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
