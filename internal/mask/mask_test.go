package mask_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/anvilmetal/anvil/internal/mask"
)

var update = flag.Bool("update", false, "rewrite the golden files' expectations from the current masker")

type textCase struct {
	In   string `json:"in"`
	Want string `json:"want"`
}

// TestTextGolden is the masker's decision table for free text
// (testdata/text.json): the examples, prose that must be left
// alone, and every form a secret is written in (key=value, JSON, Python
// repr, Go's %v, query strings, URLs with userinfo, ipmitool command
// lines, Authorization headers, XML).
func TestTextGolden(t *testing.T) {
	path := filepath.Join("testdata", "text.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []textCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		got := mask.Text(cases[i].In)
		if *update {
			cases[i].Want = got
			continue
		}
		if got != cases[i].Want {
			t.Errorf("Text(%q)\n got %q\nwant %q", cases[i].In, got, cases[i].Want)
		}
		if again := mask.Text(got); again != got {
			t.Errorf("Text is not idempotent on %q: %q", got, again)
		}
	}
	if *update {
		out, err := json.MarshalIndent(cases, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIsSecretKeyGolden is the decision table for key names
// (testdata/keys.json).
func TestIsSecretKeyGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	var keys struct {
		Secret    []string `json:"secret"`
		NotSecret []string `json:"not_secret"`
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys.Secret {
		if !mask.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false, want true", k)
		}
	}
	for _, k := range keys.NotSecret {
		if mask.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true, want false", k)
		}
	}
}

// TestMap checks map masking: secret keys at any depth whatever their
// value's type, nil kept, text scanned in other strings, the input left
// untouched.
func TestMap(t *testing.T) {
	in := map[string]any{
		"IPMI_Password": "a", "bmc_pass": "b", "snmp_auth_key": "c", "token": nil,
		"secret":  map[string]any{"a": "b"},
		"nested":  map[string]any{"list": []any{map[string]any{"auth_token": "n"}, "password=x", 1.5}},
		"strings": []string{"token=t", "plain"},
		"headers": map[string]string{"Authorization": "Basic x", "Accept": "json"},
		"note":    "configdrive: contents exceed 67108864 bytes",
		"port":    623,
	}
	out := mask.Map(in)
	got, _ := json.Marshal(out)
	const want = `{"IPMI_Password":"******","bmc_pass":"******","headers":{"Accept":"json","Authorization":"******"},` +
		`"nested":{"list":[{"auth_token":"******"},"password=******",1.5]},"note":"configdrive: contents exceed 67108864 bytes",` +
		`"port":623,"secret":"******","snmp_auth_key":"******","strings":["token=******","plain"],"token":null}`
	if string(got) != want {
		t.Fatalf("Map =\n%s\nwant\n%s", got, want)
	}
	if in["IPMI_Password"] != "a" || in["nested"].(map[string]any)["list"].([]any)[1] != "password=x" {
		t.Fatal("Map changed its input")
	}
	if mask.Map(nil) != nil {
		t.Fatal("Map(nil) != nil")
	}
}

// FuzzText checks Text never panics, is idempotent, and never grows a
// text without a secret-looking separator.
func FuzzText(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "text.json"))
	if err != nil {
		f.Fatal(err)
	}
	var cases []textCase
	if err := json.Unmarshal(b, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add(c.In)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := mask.Text(s)
		if twice := mask.Text(once); twice != once {
			t.Fatalf("Text(%q) = %q, but Text of that = %q", s, once, twice)
		}
	})
}
