package ironicapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestTrailingSlash: python-ironicclient sends its filtered lists to
// "/v1/nodes/?..." and "/v1/ports/?..."; they are served as without the
// slash, as Ironic serves them.
func TestTrailingSlash(t *testing.T) {
	l := newLab(t)
	tests := []struct {
		path string
		key  string
	}{
		{"/v1/nodes/?provision_state=enroll", "nodes"},
		{"/v1/nodes/detail/?limit=10", "nodes"},
		{"/v1/", "id"},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(http.MethodGet, l.srv.URL+tc.path, nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || body[tc.key] == nil {
			t.Errorf("GET %s: %s, %v, body %v", tc.path, resp.Status, err, body)
		}
	}
}
