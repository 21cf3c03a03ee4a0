package plugin

import (
	"testing"

	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// taskJSON is driver_internal_info as a node carries it while cleaning.
var taskJSON = []byte(`{"agent_url":"http://192.0.2.10:9999","clean_steps":[{"interface":"deploy","step":"erase_devices_metadata","priority":99,"args":{},"abortable":true},{"interface":"raid","step":"delete_configuration","priority":0,"args":{"x":1.5}}],"clean_step_index":0,"fake_power_state":"power on","is_whole_disk_image":true,"last_power_state_change":"2026-12-02T03:00:00Z"}`)

// BenchmarkDecodeTaskMap compares decoding a task map with the fast path
// and with jsonexact.Decode (encoding/json underneath).
func BenchmarkDecodeTaskMap(b *testing.B) {
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeObjectFast(taskJSON); !ok {
				b.Fatal("fast path refused the map")
			}
		}
	})
	b.Run("jsonexact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := jsonexact.Decode(taskJSON, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
