package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/steps"
)

var update = flag.Bool("update", false, "rewrite testdata/wire-contract.golden from the operation table")

const contractGolden = "testdata/wire-contract.golden"

// TestWireContractGolden renders the operation and capability tables and
// the error codes and compares them with the reviewed golden file, so
// that any change to what crosses the plugin boundary shows up in a diff.
func TestWireContractGolden(t *testing.T) {
	got := renderContract()
	if *update {
		if err := os.WriteFile(contractGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(contractGolden)
	if err != nil {
		t.Fatalf("%v (run go test ./driver/plugin -run TestWireContractGolden -update)", err)
	}
	if got != string(want) {
		t.Errorf("the wire contract changed; review the diff, bump ProtocolVersion when it breaks an N-1 peer, and rerun with -update.\ngot:\n%s", got)
	}
}

// TestWireContractNamesEveryOperation checks that the table lists every
// operation name constant of the package, once per kind.
func TestWireContractNamesEveryOperation(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "op") && len(name.Name) > 2 && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						consts[v] = true
					}
				}
			}
			return true
		})
	}
	inTable := map[string]bool{}
	seen := map[string]bool{}
	for _, o := range operations() {
		key := string(o.kind) + " " + o.name
		if seen[key] {
			t.Errorf("operation %q listed twice", key)
		}
		seen[key] = true
		inTable[o.name] = true
	}
	for c := range consts {
		if !inTable[c] {
			t.Errorf("operation %q is declared but not in the wire contract table", c)
		}
	}
	for c := range inTable {
		if !consts[c] {
			t.Errorf("table operation %q has no op constant", c)
		}
	}
}

// kindInterfaces are the Go interfaces of each kind, whose methods the
// proxies implement.
var kindInterfaces = map[driver.Kind]reflect.Type{
	driver.KindPower:      reflect.TypeFor[driver.PowerInterface](),
	driver.KindManagement: reflect.TypeFor[driver.ManagementInterface](),
	driver.KindBoot:       reflect.TypeFor[driver.BootInterface](),
	driver.KindDeploy:     reflect.TypeFor[driver.DeployInterface](),
	driver.KindInspect:    reflect.TypeFor[driver.InspectInterface](),
	driver.KindBIOS:       reflect.TypeFor[driver.BIOSInterface](),
	driver.KindRAID:       reflect.TypeFor[driver.RAIDInterface](),
	driver.KindConsole:    reflect.TypeFor[driver.ConsoleInterface](),
	driver.KindVendor:     reflect.TypeFor[driver.VendorInterface](),
	driver.KindRescue:     reflect.TypeFor[driver.RescueInterface](),
	driver.KindFirmware:   reflect.TypeFor[driver.FirmwareInterface](),
	driver.KindNetwork:    reflect.TypeFor[driver.NetworkInterface](),
	driver.KindStorage:    reflect.TypeFor[driver.StorageInterface](),
}

// capabilityValues returns impl's optional capabilities as values with
// their interface types, found with driver.As.
func capabilityValues(impl driver.Interface) map[reflect.Type]any {
	out := map[reflect.Type]any{}
	add := func(t reflect.Type, v any, ok bool) {
		if ok {
			out[t] = v
		}
	}
	r, ok := driver.As[driver.StepRunner](impl)
	add(reflect.TypeFor[driver.StepRunner](), r, ok)
	sp, ok := driver.As[driver.StepPreparer](impl)
	add(reflect.TypeFor[driver.StepPreparer](), sp, ok)
	bm, ok := driver.As[driver.BootModeManager](impl)
	add(reflect.TypeFor[driver.BootModeManager](), bm, ok)
	n, ok := driver.As[driver.NMIInjector](impl)
	add(reflect.TypeFor[driver.NMIInjector](), n, ok)
	im, ok := driver.As[driver.IndicatorManager](impl)
	add(reflect.TypeFor[driver.IndicatorManager](), im, ok)
	sb, ok := driver.As[driver.SecureBootManager](impl)
	add(reflect.TypeFor[driver.SecureBootManager](), sb, ok)
	sr, ok := driver.As[driver.SensorReader](impl)
	add(reflect.TypeFor[driver.SensorReader](), sr, ok)
	vm, ok := driver.As[driver.VirtualMediaManager](impl)
	add(reflect.TypeFor[driver.VirtualMediaManager](), vm, ok)
	hr, ok := driver.As[driver.HealthReader](impl)
	add(reflect.TypeFor[driver.HealthReader](), hr, ok)
	return out
}

// TestWireContractProxiesSendTheTable calls every method of every proxy,
// with every capability advertised, and checks that each call sends one
// operation of the table to its kind with exactly the table's arguments,
// and that every row of the table is sent by some method.
func TestWireContractProxiesSendTheTable(t *testing.T) {
	var all []string
	for _, c := range capabilities() {
		all = append(all, c.name)
	}
	rows := map[string]operation{}
	for _, o := range operations() {
		rows[string(o.kind)+" "+o.name] = o
	}
	sent := map[string]bool{}
	ctxType := reflect.TypeFor[context.Context]()
	for _, kind := range driver.Kinds() {
		rec := &recordingClient{}
		impl, err := newTestPlugin(rec).newProxy(&pb.Implementation{Kind: string(kind), Name: "x", Capabilities: all}, ProtocolVersion)
		if err != nil {
			t.Fatal(err)
		}
		values := capabilityValues(impl)
		values[kindInterfaces[kind]] = impl
		for iface, v := range values {
			for m := range iface.Methods() {
				if m.Type.NumIn() < 2 || m.Type.In(0) != ctxType {
					continue // metadata (Properties, Methods, Steps): no call
				}
				in := []reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf(&driver.Task{NodeUUID: "n1"})}
				for i := 2; i < m.Type.NumIn(); i++ {
					in = append(in, sampleValue(m.Type.In(i), kind))
				}
				before := len(rec.reqs)
				out := reflect.ValueOf(v).MethodByName(m.Name).Call(in)
				if err, _ := out[len(out)-1].Interface().(error); err != nil {
					t.Errorf("%s %s.%s: %v", kind, iface, m.Name, err)
					continue
				}
				if len(rec.reqs) != before+1 {
					t.Errorf("%s %s.%s sent %d requests, want 1", kind, iface, m.Name, len(rec.reqs)-before)
					continue
				}
				req := rec.reqs[before]
				row, ok := rows[req.Kind+" "+req.Operation]
				if !ok {
					row, ok = rows[" "+req.Operation]
				}
				if !ok || req.Kind != string(kind) {
					t.Errorf("%s %s.%s sent %s %q, which is not in the wire contract", kind, iface, m.Name, req.Kind, req.Operation)
					continue
				}
				sent[string(row.kind)+" "+row.name] = true
				var args map[string]json.RawMessage
				if len(req.ArgsJson) > 0 {
					if err := json.Unmarshal(req.ArgsJson, &args); err != nil {
						t.Fatalf("%s %s: args %s: %v", kind, req.Operation, req.ArgsJson, err)
					}
				}
				keys := slices.Sorted(maps.Keys(args))
				if want := slices.Sorted(slices.Values(row.args)); !slices.Equal(keys, want) {
					t.Errorf("%s %s sends arguments %v, the contract says %v", kind, req.Operation, keys, want)
				}
			}
		}
	}
	for key := range rows {
		if !sent[key] {
			t.Errorf("no proxy method sends %q", key)
		}
	}
}

// TestWireContractServerDispatchesTheTable sends every row of the table
// to a plugin server serving the built-in fakes, which implement every
// kind and capability, and checks that none is refused as unsupported
// and that each result decodes into the row's result type, strictly. An
// operation outside the table is refused.
func TestWireContractServerDispatchesTheTable(t *testing.T) {
	srv, err := newServer(ServeConfig{Name: "fakes", Bundle: builtin.Bundle(fake.Config{})}, HostProtocolVersions())
	if err != nil {
		t.Fatal(err)
	}
	argTypes := invokeArgTypes()
	ctx := context.Background()
	invoke := func(kind driver.Kind, op string, args map[string]any) *pb.InvokeResponse {
		t.Helper()
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		task, err := encodeTask(&driver.Task{NodeUUID: "n1", HardwareType: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Invoke(ctx, &pb.InvokeRequest{Kind: string(kind), Implementation: fake.Name, Operation: op, Task: task, ArgsJson: raw})
		if err != nil {
			t.Fatalf("%s %s: %v", kind, op, err)
		}
		return resp
	}
	for _, o := range operations() {
		kinds := []driver.Kind{o.kind}
		if o.kind == "" {
			kinds = nil
			for _, k := range driver.Kinds() {
				if o.capability == "" || slices.Contains(srv.describeCapabilities(k), o.capability) {
					kinds = append(kinds, k)
				}
			}
		}
		for _, kind := range kinds {
			args := map[string]any{}
			for _, a := range o.args {
				args[a] = sampleValue(argTypes[a], kind).Interface()
			}
			if o.name == opVendorCall {
				// A method the fake vendor interface declares.
				vm := srv.impls[kind][fake.Name].(driver.VendorInterface).Methods()[0]
				args["method"], args["http_method"] = vm.Name, vm.HTTPMethods[0]
			}
			resp := invoke(kind, o.name, args)
			if resp.Error != nil {
				if resp.Error.Code == pb.Error_UNSUPPORTED {
					t.Errorf("%s %s refused as unsupported: %s", kind, o.name, resp.Error.Message)
				}
				continue
			}
			if o.result == nil {
				if len(resp.ResultJson) > 0 && string(resp.ResultJson) != "null" {
					t.Errorf("%s %s returned %s, the contract says no result", kind, o.name, resp.ResultJson)
				}
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(resp.ResultJson))
			dec.DisallowUnknownFields()
			if err := dec.Decode(reflect.New(o.result).Interface()); err != nil {
				t.Errorf("%s %s result %s does not decode as %s: %v", kind, o.name, resp.ResultJson, o.result, err)
			}
		}
	}
	if resp := invoke(driver.KindPower, "power_cycle_twice", nil); resp.Error == nil || resp.Error.Code != pb.Error_UNSUPPORTED {
		t.Errorf("an operation outside the contract answered %v", resp)
	}
}

// describeCapabilities returns the capabilities the server advertises
// for its implementation of kind.
func (s *server) describeCapabilities(kind driver.Kind) []string {
	for name, impl := range s.impls[kind] {
		if name == fake.Name {
			return advertised(kind, impl)
		}
	}
	return nil
}

// invokeArgTypes maps the JSON names of invokeArgs to their types, with
// raw JSON fields replaced by the type they carry.
func invokeArgTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range reflect.TypeFor[invokeArgs]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = f.Type
		if rt, ok := rawArgTypes[name]; ok {
			out[name] = rt
		}
	}
	return out
}

// sampleValue returns a non-zero value of t (so that no omitempty field
// vanishes) that the fakes accept where they validate.
func sampleValue(t reflect.Type, kind driver.Kind) reflect.Value {
	samples := map[reflect.Type]any{
		reflect.TypeFor[driver.PowerState]():           driver.PowerOn,
		reflect.TypeFor[time.Duration]():               time.Second,
		reflect.TypeFor[driver.BootDevice]():           driver.BootPXE,
		reflect.TypeFor[driver.BootMode]():             driver.BootModeUEFI,
		reflect.TypeFor[driver.IndicatorState]():       driver.IndicatorBlinking,
		reflect.TypeFor[driver.NetworkPurpose]():       driver.NetworkCleaning,
		reflect.TypeFor[steps.Kind]():                  steps.Clean,
		reflect.TypeFor[driver.VirtualMediaDevice]():   driver.VirtualMediaCDROM,
		reflect.TypeFor[[]driver.VirtualMediaDevice](): []driver.VirtualMediaDevice{driver.VirtualMediaCDROM},
		reflect.TypeFor[steps.Step]():                  steps.Step{Interface: string(kind), Name: "s"},
	}
	if v, ok := samples[t]; ok {
		return reflect.ValueOf(v).Convert(t)
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("GET")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(int64(time.Second))
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]any{"key": "value"}))
	default:
		panic(fmt.Sprintf("no sample value for %s", t))
	}
	return v
}

// renderContract renders the wire contract as reviewed text.
func renderContract() string {
	var b strings.Builder
	b.WriteString(`# Anvil driver plugin wire contract. Generated by TestWireContractGolden
# from driver/plugin/operations.go and capabilities.go; rewrite with
#   go test ./driver/plugin -run TestWireContractGolden -update
# and review the diff: a removed or changed row breaks a peer one
# protocol version apart (see "Wire contract" in the package doc).
#
# Transport: gRPC service anvil.driver.plugin.Driver (internal/proto/driver.proto),
# Describe() and Invoke(kind, implementation, operation, task, args_json)
# -> (result_json, changes, error). args_json is one JSON object; every
# argument is optional on the wire and an absent one is its zero value.
# result_json is one JSON value, absent when the operation has none.
`)
	fmt.Fprintf(&b, "\nprotocol versions: current %d, previous %d (accepted)\n", ProtocolVersion, PreviousProtocolVersion)

	b.WriteString("\n## capabilities (Describe: Implementation.capabilities)\n\n")
	for _, c := range capabilities() {
		kind := string(c.kind)
		if kind == "" {
			kind = "any kind"
		}
		fmt.Fprintf(&b, "%-14s %-11s since %d\n", c.name, kind, c.since)
	}

	b.WriteString("\n## operations (Invoke)\n")
	argTypes := invokeArgTypes()
	named := map[reflect.Type]bool{}
	for _, o := range operations() {
		kind := string(o.kind)
		if kind == "" {
			kind = "any"
		}
		fmt.Fprintf(&b, "\n%s %s\n", kind, o.name)
		if o.capability != "" {
			since := 0
			for _, c := range capabilities() {
				if c.name == o.capability {
					since = c.since
				}
			}
			fmt.Fprintf(&b, "  needs:  %s (since protocol %d)\n", o.capability, since)
		}
		var args []string
		for _, a := range o.args {
			args = append(args, strconv.Quote(a)+": "+shape(argTypes[a], named))
		}
		fmt.Fprintf(&b, "  args:   {%s}\n", strings.Join(args, ", "))
		fmt.Fprintf(&b, "  result: %s\n", shape(o.result, named))
	}

	b.WriteString("\n## error codes (InvokeResponse.error.code)\n\n")
	codes := make([]int, 0, len(pb.Error_Code_name))
	for c := range pb.Error_Code_name {
		codes = append(codes, int(c))
	}
	sort.Ints(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, "%2d %s\n", c, pb.Error_Code_name[int32(c)])
	}

	b.WriteString("\n## types\n")
	for done := map[reflect.Type]bool{}; ; {
		var next []reflect.Type
		for t := range named {
			if !done[t] {
				next = append(next, t)
			}
		}
		if len(next) == 0 {
			break
		}
		sort.Slice(next, func(i, j int) bool { return next[i].String() < next[j].String() })
		for _, t := range next {
			done[t] = true
			fmt.Fprintf(&b, "\n%s {\n", t)
			for f := range t.Fields() {
				tag := f.Tag.Get("json")
				if !f.IsExported() || tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if name == "" {
					name = f.Name
				}
				opt := ""
				if strings.Contains(opts, "omitempty") {
					opt = " (omitempty)"
				}
				fmt.Fprintf(&b, "  %q: %s%s\n", name, shape(f.Type, named), opt)
			}
			b.WriteString("}\n")
		}
	}
	return b.String()
}

// shape describes the JSON shape of t and records the named structs it
// reaches in named.
func shape(t reflect.Type, named map[reflect.Type]bool) string {
	if t == nil {
		return "none"
	}
	switch t.Kind() {
	case reflect.Interface:
		return "any JSON value"
	case reflect.Pointer:
		return shape(t.Elem(), named) + " or null"
	case reflect.Slice:
		return "[" + shape(t.Elem(), named) + "]"
	case reflect.Map:
		return "{string: " + shape(t.Elem(), named) + "}"
	case reflect.Struct:
		named[t] = true
		return t.String()
	}
	if t.Name() != "" && t.PkgPath() != "" {
		return t.Kind().String() + " (" + t.String() + ")"
	}
	return t.Kind().String()
}
