package rfdriver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// FuzzParseInfo feeds arbitrary driver_info JSON to ParseInfo: it must
// never panic, must fail only with a *driver.MissingParameterError or a
// *driver.InvalidParameterError, and must never echo the
// password.
func FuzzParseInfo(f *testing.F) {
	for _, s := range []string{
		`{"redfish_address":"https://10.0.0.1","redfish_username":"u","redfish_password":"pw"}`,
		`{"redfish_address":"bmc:8443/pre","redfish_verify_ca":"false","redfish_auth_type":"session"}`,
		`{"redfish_address":"ftp://x"}`, `{"redfish_address":"http://u:pw@x"}`, `{"redfish_system_id":"1"}`,
		`{"redfish_address":7}`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var di map[string]any
		if json.Unmarshal([]byte(raw), &di) != nil {
			return
		}
		di["redfish_password"] = "FUZZ-SECRET-PW"
		if _, ok := di["redfish_username"]; !ok {
			di["redfish_username"] = "u"
		}
		info, err := parseInfo(di)
		if err != nil {
			var me *driver.MissingParameterError
			var ie *driver.InvalidParameterError
			if !errors.As(err, &me) && !(errors.As(err, &ie) && errors.Is(err, driver.ErrInvalidParameter)) {
				t.Fatalf("untyped error %T %v", err, err)
			}
			if strings.Contains(err.Error(), "FUZZ-SECRET-PW") {
				t.Fatalf("password in error: %v", err)
			}
			return
		}
		if !strings.HasPrefix(info.Endpoint, "http://") && !strings.HasPrefix(info.Endpoint, "https://") {
			t.Fatalf("endpoint %q", info.Endpoint)
		}
		if strings.Contains(info.String(), "FUZZ-SECRET-PW") {
			t.Fatal("password in String")
		}
	})
}
