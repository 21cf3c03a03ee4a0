package baremetal_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
)

// TestAllMaskersAgree proves the public maskers are one masker: for every
// key of the masker's golden key table, baremetal.MaskSecrets,
// agentclient.MaskSecrets and driver.Mask give the same result, masking
// exactly the secret keys (before, driver.Mask missed configdrive,
// passphrase and sslkey and wrote "***", and none masked bmc_pass), and
// MaskText leaves the prose whole.
func TestAllMaskersAgree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "internal", "mask", "testdata", "keys.json"))
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
	in := map[string]any{"nested": map[string]any{}}
	nested := in["nested"].(map[string]any)
	for _, k := range append(append([]string{}, keys.Secret...), keys.NotSecret...) {
		in[k] = "value-of-" + k
		nested[k] = []any{"value-of-" + k}
	}
	bm, ac, dr := baremetal.MaskSecrets(in), agentclient.MaskSecrets(in), driver.Mask(in)
	if !reflect.DeepEqual(bm, ac) || !reflect.DeepEqual(bm, dr) {
		t.Fatalf("maskers disagree:\nbaremetal   %v\nagentclient %v\ndriver      %v", bm, ac, dr)
	}
	for _, k := range keys.Secret {
		if bm[k] != baremetal.Mask || bm["nested"].(map[string]any)[k] != baremetal.Mask {
			t.Errorf("secret key %q not masked: %v", k, bm[k])
		}
	}
	for _, k := range keys.NotSecret {
		if bm[k] != "value-of-"+k {
			t.Errorf("key %q masked: %v", k, bm[k])
		}
	}
	for _, s := range []string{"configdrive: contents exceed 67108864 bytes", "password: is required"} {
		if got := baremetal.MaskText(s); got != s {
			t.Errorf("MaskText(%q) = %q", s, got)
		}
	}
	if got := baremetal.MaskText("bmc_pass=hunter2"); got != "bmc_pass="+baremetal.Mask {
		t.Errorf("MaskText(bmc_pass=hunter2) = %q", got)
	}
}
