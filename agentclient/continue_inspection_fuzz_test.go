package agentclient_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
)

// FuzzContinueInspection feeds arbitrary bodies to the continue_inspection
// parser and endpoint. The parser returns a typed *InspectionDataError or
// a request whose addresses are normalised MACs taken from the body and
// whose plugin data holds every other key; the endpoint answers 202 or a
// 4xx, never a panic or a 5xx, and records data only with a 202.
func FuzzContinueInspection(f *testing.F) {
	f.Add([]byte(inspectBody(`"boot_interface":"` + nodeMAC + `"`)))
	f.Add([]byte(bodyWithInterfaces(`[{"mac_address":"` + nodeMAC + `"}]`)))
	f.Add([]byte(bodyWithInterfaces(`[{"mac_address":"52-54-00-AA-BB-01"},{"mac_address":"x"}]`)))
	f.Add([]byte(bodyWithInterfaces(`[]`)))
	f.Add([]byte(bodyWithInterfaces(`[{"mac_address":null}]`)))
	f.Add([]byte(`{"inventory":{"interfaces":[{"mac_address":"q"}],"bmc_address":"` + bmcAddr + `","cpu":{"count":"x"}}}`))
	f.Add([]byte(`{"inventory":{"Interfaces":[{"mac_address":"` + nodeMAC + `"}]}}`))
	f.Add([]byte(`{"inventory":null}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"inventory":{"interfaces":[{"mac_address":"` + nodeMAC + `"}]}} trailing`))
	f.Add([]byte("\xff"))
	b := agenttest.NewBackend()
	if err := b.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "inspect wait"}, nodeMAC); err != nil {
		f.Fatal(err)
	}
	h, err := agentclient.NewHandler(b, agentclient.HandlerConfig{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := agentclient.DecodeInspectionRequest(body)
		if err != nil {
			var de *agentclient.InspectionDataError
			if !errors.As(err, &de) || !errors.Is(err, agentclient.ErrInvalidArgument) || de.Field == "" {
				t.Fatalf("untyped error %v", err)
			}
		} else {
			if req.PluginData == nil {
				t.Fatal("nil plugin data")
			}
			if _, ok := req.PluginData["inventory"]; ok {
				t.Fatal("inventory in plugin data")
			}
			var inv map[string]any
			if json.Unmarshal(req.RawInventory, &inv) != nil || inv == nil {
				t.Fatalf("raw inventory %q is not an object", req.RawInventory)
			}
			seen := map[string]bool{}
			for _, a := range req.Addresses {
				if mac, ok := agentclient.ParseMAC(a); !ok || mac != a || seen[a] {
					t.Fatalf("address %q not a normalised, unique MAC", a)
				}
				seen[a] = true
			}
			if n := len(inv["interfaces"].([]any)); len(req.Addresses)+len(req.InvalidAddresses) > n || n == 0 {
				t.Fatalf("%d+%d addresses from %d interfaces", len(req.Addresses), len(req.InvalidAddresses), n)
			}
		}
		before := b.InspectionCount(nodeID)
		r := httptest.NewRequest(http.MethodPost, "/v1/continue_inspection", strings.NewReader(string(body)))
		r.Header.Set(agentclient.HeaderAPIVersion, "1.84")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		switch rec.Code {
		case 202, 400, 404:
		default:
			t.Fatalf("HTTP %d for %q: %s", rec.Code, body, rec.Body)
		}
		if (rec.Code == 202) != (err == nil && b.InspectionCount(nodeID) == before+1) && rec.Code != 404 {
			t.Fatalf("HTTP %d but parse error %v, recorded %d→%d", rec.Code, err, before, b.InspectionCount(nodeID))
		}
		if rec.Code != 202 && b.InspectionCount(nodeID) != before {
			t.Fatal("refused data recorded")
		}
	})
}
