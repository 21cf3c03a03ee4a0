package ironicapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

// FuzzPortDocument feeds arbitrary port documents to the create/PATCH
// validation: it never panics, and what it accepts is normalised (the
// MAC address and switch_id read back unchanged through another pass)
// and within Ironic's schema bounds.
func FuzzPortDocument(f *testing.F) {
	for _, s := range []string{
		`{"address":"52:54:00:AB:CD:EF"}`,
		`{"address":"52-54-00-ab-cd-ef","pxe_enabled":"no","is_smartnic":true,"local_link_connection":{"port_id":"p","hostname":"h"}}`,
		`{"address":"52:54:00:ab:cd:ef","local_link_connection":{"port_id":"p","switch_id":"0x00000000000000AB","switch_info":"x"}}`,
		`{"address":"52:54:00:ab:cd:ef","local_link_connection":{"network_type":"unmanaged"},"physical_network":"p","vendor":"v"}`,
		`{"address":"52:54:00:ab:cd:ef","local_link_connection":{"port_id":"p","vtep-logical-switch":"a","vtep-physical-switch":"b"}}`,
		`{"address":1,"extra":[],"name":{}}`,
	} {
		f.Add(s)
	}
	rq := &request{v: MaxVersion}
	f.Fuzz(func(t *testing.T, s string) {
		var doc map[string]any
		if json.Unmarshal([]byte(s), &doc) != nil || doc == nil {
			return
		}
		p := &baremetal.Port{}
		if err := rq.setPortFields(p, doc); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if mac, err := baremetal.NormalizeMAC("address", p.Address); err != nil || mac != p.Address {
			t.Fatalf("accepted address %q is not normalised (%q, %v)", p.Address, mac, err)
		}
		if len([]rune(p.PhysicalNetwork)) > 64 || len([]rune(p.Vendor)) > 32 || len([]rune(p.Category)) > 80 || len([]rune(p.Description)) > 255 {
			t.Fatalf("accepted a field beyond its bound: %+v", p)
		}
		if sw, ok := p.LocalLinkConnection["switch_id"].(string); ok && sw != strings.ToLower(sw) {
			t.Fatalf("switch_id %q not normalised", sw)
		}
		again, err := checkLocalLink(p.LocalLinkConnection)
		if err != nil || portJSON(again) != portJSON(p.LocalLinkConnection) {
			t.Fatalf("an accepted link does not pass again unchanged: %v %v", again, err)
		}
	})
}
