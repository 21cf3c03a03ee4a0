package plugin

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/anvilmetal/anvil/driver"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// FuzzDecodeInvoke feeds arbitrary bytes to the decoding a plugin applies
// to a host request and the host applies to a plugin response: it must
// never panic, and a task that decodes must encode again.
func FuzzDecodeInvoke(f *testing.F) {
	seed := &driver.Task{NodeUUID: "n1", HardwareType: "fake-hardware", Interfaces: map[driver.Kind]string{driver.KindPower: "fake"},
		DriverInfo: map[string]any{"a": 1.0}, Ports: []driver.Port{{Address: "52:54:00:00:00:01"}}}
	pt, err := encodeTask(seed)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := proto.Marshal(&pb.InvokeRequest{Kind: "power", Implementation: "fake", Operation: "get_power_state", Task: pt, ArgsJson: []byte(`{"target":"power on"}`)})
	f.Add(b)
	cb, _ := proto.Marshal(&pb.InvokeResponse{Changes: &pb.Changes{DriverInternalInfoJson: []byte(`{"x":true}`), PortsChanged: true, PortsJson: []byte(`[]`)},
		Error: &pb.Error{Code: pb.Error_MISSING_PARAMETER, DetailJson: []byte(`{"Missing":["a"]}`)}})
	f.Add(cb)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req pb.InvokeRequest
		if proto.Unmarshal(data, &req) == nil && req.Task != nil {
			if task, err := decodeTask(req.Task); err == nil {
				if _, err := encodeTask(task); err != nil {
					t.Errorf("decoded task does not encode: %v", err)
				}
			}
		}
		var resp pb.InvokeResponse
		if proto.Unmarshal(data, &resp) == nil {
			if c, err := decodeChanges(resp.Changes); err == nil {
				(&driver.Task{}).Apply(c)
			}
			if resp.Error != nil && decodeError("fuzz", resp.Error) == nil {
				t.Error("an error message decoded to nil")
			}
		}
	})
}

// FuzzDecodeObjectFast checks that the fast object decoder, on every
// input it accepts, decodes exactly what jsonexact.Decode does.
func FuzzDecodeObjectFast(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,false,null,"x\n\"y\\/"],"c":{"d":-0.5e-7}}`, `{"n":9007199254740993,"f":1.0,"z":-0,"e":1E400}`,
		` { "a" : [ ] , "a" : { } } `, `{"u":"\u00e9"}`, `{"x":"` + "\xff" + `"}`, `[1]`, `{"a":1}x`, `{"a":01}`, `{"deep":[[[[[[[[[[1]]]]]]]]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeObjectFast(data)
		if !ok {
			return
		}
		var want map[string]any
		if err := jsonexact.Decode(data, &want); err != nil {
			t.Fatalf("fast path accepted %q, jsonexact refuses it: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoding %q: fast path %#v, jsonexact %#v", data, got, want)
		}
	})
}
