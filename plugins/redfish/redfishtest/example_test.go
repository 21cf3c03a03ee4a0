package redfishtest_test

import (
	"fmt"
	"net/http"

	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// Example starts the mockup BMC and reads a resource with HTTP Basic.
func Example() {
	bmc, err := redfishtest.New(redfishtest.Options{})
	if err != nil {
		panic(err)
	}
	defer bmc.Close()
	req, _ := http.NewRequest(http.MethodGet, bmc.URL()+"/redfish/v1/Systems/"+redfishtest.SystemID, nil)
	req.SetBasicAuth("admin", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, bmc.PowerState(), bmc.Stats().Requests)
	// Output:
	// 200 Off 1
}
