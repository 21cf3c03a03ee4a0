package baremetal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

var secrets = []string{"Ipmi-Secret-1", "Redfish-Secret-2", "Agent-Token-3", "Cfg-Drive-4", "Nested-Secret-5", "Text-Secret-6"}

func secretNode() *baremetal.Node {
	return &baremetal.Node{
		UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Name: "node-1", Driver: "ipmi",
		ProvisionState: "clean wait", Reservation: "conductor-1", Version: 7,
		DriverInfo: map[string]any{
			"ipmi_address": "10.0.0.1", "ipmi_password": "Ipmi-Secret-1", "ipmi_username": "admin",
			"redfish_password": "Redfish-Secret-2",
			"nested":           map[string]any{"list": []any{map[string]any{"auth_token": "Nested-Secret-5"}}},
		},
		DriverInternalInfo: map[string]any{"agent_secret_token": "Agent-Token-3", "agent_url": "https://10.0.0.9:9999"},
		InstanceInfo:       map[string]any{"configdrive": "Cfg-Drive-4", "image_url": "http://u:Text-Secret-6@host/img", "root_gb": 10},
		LastError:          "BMC rejected ipmi_password=Text-Secret-6 for admin",
	}
}

func assertClean(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Fatalf("%s leaks %q:\n%s", what, sec, s)
		}
	}
}

func TestNodeFormattingNeverShowsSecrets(t *testing.T) {
	n := secretNode()
	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%T %v"} {
		outputs["ptr "+verb] = fmt.Sprintf(verb, n)
		if verb != "%T %v" {
			outputs["value "+verb] = fmt.Sprintf(verb, *n)
		}
	}
	outputs["Sprint"] = fmt.Sprint(n, *n)
	outputs["Sprintln"] = fmt.Sprintln(n)
	outputs["slice"] = fmt.Sprintf("%v %+v", []*baremetal.Node{n}, []baremetal.Node{*n})
	outputs["map"] = fmt.Sprintf("%v", map[string]*baremetal.Node{"a": n})
	outputs["struct"] = fmt.Sprintf("%+v", struct{ N *baremetal.Node }{n})
	outputs["String"] = n.String()
	outputs["GoString"] = n.GoString()
	for k, v := range outputs {
		assertClean(t, k, v)
	}
	// The masked views still say what the node is.
	if !strings.Contains(outputs["ptr %v"], n.UUID) || !strings.Contains(outputs["ptr %v"], "clean wait") {
		t.Fatalf("%%v lost the identity: %s", outputs["ptr %v"])
	}
	if !strings.Contains(outputs["ptr %+v"], baremetal.Mask) || !strings.Contains(outputs["ptr %+v"], "10.0.0.1") {
		t.Fatalf("%%+v should show driver_info masked: %s", outputs["ptr %+v"])
	}
}

func TestNodeJSONAndLogsNeverShowSecrets(t *testing.T) {
	n := secretNode()
	for _, v := range []any{n, *n, []*baremetal.Node{n}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		assertClean(t, "json", string(b))
		if !bytes.Contains(b, []byte(baremetal.Mask)) {
			t.Fatalf("json shows no mask: %s", b)
		}
	}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&buf, nil), slog.NewTextHandler(&buf, nil)} {
		l := slog.New(h)
		l.Info("node", "node", n)
		l.Info("node value", "node", *n)
		l.Info("nodes", "nodes", []*baremetal.Node{n})
		l.Info("group", slog.Group("g", "node", n))
	}
	logger := log.New(&buf, "", 0)
	logger.Printf("working on %v / %+v", n, n)
	assertClean(t, "logs", buf.String())
	if !strings.Contains(buf.String(), "node-1") {
		t.Fatalf("logs lost the node: %s", buf.String())
	}
}

func TestErrorsNeverShowSecrets(t *testing.T) {
	n := secretNode()
	errs := []error{
		fmt.Errorf("deploy of %v failed: %w", n, &baremetal.NodeLockedError{Node: n.UUID, Holder: "c-2"}),
		fmt.Errorf("node %+v: %w", n, baremetal.ErrConflict),
		&baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "driver_info", Expected: "a JSON-encodable object"},
		&baremetal.ConflictError{Kind: "node", Ident: n.UUID, Expected: 1, Actual: 2},
	}
	for _, e := range errs {
		assertClean(t, "error", e.Error())
		assertClean(t, "error %+v", fmt.Sprintf("%+v", e))
	}
}

func TestMaskedLeavesOriginalIntact(t *testing.T) {
	n := secretNode()
	m := n.Masked()
	if n.DriverInfo["ipmi_password"] != "Ipmi-Secret-1" || n.DriverInternalInfo["agent_secret_token"] != "Agent-Token-3" {
		t.Fatal("Masked changed the original node")
	}
	if m.DriverInfo["ipmi_password"] != baremetal.Mask || m.DriverInfo["redfish_password"] != baremetal.Mask ||
		m.DriverInternalInfo["agent_secret_token"] != baremetal.Mask || m.InstanceInfo["configdrive"] != baremetal.Mask ||
		m.InstanceInfo["image_url"] != baremetal.Mask {
		t.Fatalf("secrets not masked: %#v", m.DriverInfo)
	}
	if m.DriverInfo["ipmi_address"] != "10.0.0.1" || m.DriverInfo["ipmi_username"] != "admin" || m.InstanceInfo["root_gb"] != 10 {
		t.Fatal("masking removed values that are not secret")
	}
	nested := m.DriverInfo["nested"].(map[string]any)["list"].([]any)[0].(map[string]any)
	if nested["auth_token"] != baremetal.Mask {
		t.Fatalf("nested secret not masked: %v", nested)
	}
	assertClean(t, "LastError", m.LastError)
}

func TestMaskSecretsRules(t *testing.T) {
	in := map[string]any{
		"IPMI_Password":       "a",
		"snmp_auth_key":       "b",
		"my_private_key_file": "c",
		"token":               nil,
		"plain":               "user=bob password=hunter2 other=1",
		"json_text":           `{"admin_pass": "pw123", "x": 1}`,
		"numbers":             []any{1.5, "secret=abc"},
		"strings":             []string{"token=t0k3n", "token: is required"},
		"port":                623,
	}
	out := baremetal.MaskSecrets(in)
	want := map[string]any{
		"IPMI_Password": baremetal.Mask, "snmp_auth_key": baremetal.Mask, "my_private_key_file": baremetal.Mask,
		"token": nil, "port": 623,
		"plain":     "user=bob password=" + baremetal.Mask + " other=1",
		"json_text": `{"admin_pass": "` + baremetal.Mask + `", "x": 1}`,
	}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s: got %#v, want %#v", k, out[k], v)
		}
	}
	if l := out["numbers"].([]any); l[0] != 1.5 || l[1] != "secret="+baremetal.Mask {
		t.Errorf("list: %v", l)
	}
	// "token: is required" is prose (a key, a colon and a space before an
	// unquoted word), not a secret, so it is left whole.
	if l := out["strings"].([]string); l[0] != "token="+baremetal.Mask || l[1] != "token: is required" {
		t.Errorf("string list: %v", l)
	}
	if in["IPMI_Password"] != "a" {
		t.Error("MaskSecrets changed its input")
	}
	if baremetal.MaskSecrets(nil) != nil {
		t.Error("MaskSecrets(nil) should be nil")
	}
	for _, k := range []string{"ipmi_password", "redfish_password", "agent_secret_token", "CONFIGDRIVE"} {
		if !baremetal.IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = false", k)
		}
	}
	for _, k := range []string{"ipmi_address", "ipmi_username", "agent_url"} {
		if baremetal.IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = true", k)
		}
	}
}

func TestErrorsMatchSentinels(t *testing.T) {
	cases := []struct {
		err  error
		want []error
	}{
		{&baremetal.NotFoundError{Kind: "node", Ident: "x"}, []error{baremetal.ErrNotFound}},
		{&baremetal.NodeLockedError{Node: "n", Holder: "h"}, []error{baremetal.ErrNodeLocked}},
		{&baremetal.NodeNotLockedError{Node: "n"}, []error{baremetal.ErrNodeNotLocked}},
		{&baremetal.ConflictError{Kind: "node", Ident: "n"}, []error{baremetal.ErrConflict}},
		{&baremetal.InvalidFieldError{Kind: "node", Field: "f"}, []error{baremetal.ErrInvalidInput}},
		{&baremetal.DuplicateError{Kind: "node", Field: "name"}, []error{baremetal.ErrDuplicate, baremetal.ErrInvalidInput}},
		{&baremetal.ConductorAlreadyRegisteredError{Hostname: "h"}, []error{baremetal.ErrConductorAlreadyRegistered}},
		{&baremetal.NodeInUseError{Node: "n", Holder: "h"}, []error{baremetal.ErrNodeInUse, baremetal.ErrNodeLocked}},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("outer: %w", c.err)
		for _, w := range c.want {
			if !errors.Is(wrapped, w) {
				t.Errorf("%T does not match %v", c.err, w)
			}
		}
		if errors.Is(wrapped, baremetal.ErrNotFound) && c.want[0] != baremetal.ErrNotFound {
			t.Errorf("%T matches ErrNotFound", c.err)
		}
		if !strings.HasPrefix(c.err.Error(), "baremetal: ") {
			t.Errorf("%T text %q lacks the component prefix", c.err, c.err)
		}
	}
	locked := (&baremetal.NodeLockedError{Node: "node-9", Holder: "cond-3"}).Error()
	if !strings.Contains(locked, "node-9") || !strings.Contains(locked, "cond-3") {
		t.Errorf("NodeLocked text %q must name node and holder", locked)
	}
}

func TestNormalizeMAC(t *testing.T) {
	for in, want := range map[string]string{
		"52:54:00:AB:CD:EF": "52:54:00:ab:cd:ef", "52-54-00-ab-cd-ef": "52:54:00:ab:cd:ef", " 52:54:00:ab:cd:ef ": "52:54:00:ab:cd:ef",
	} {
		got, err := baremetal.NormalizeMAC("address", in)
		if err != nil || got != want {
			t.Errorf("NormalizeMAC(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "52:54:00:ab:cd", "5254.00ab.cdef", "52:54:00:ab:cd:ef:00:11", "zz:54:00:ab:cd:ef"} {
		_, err := baremetal.NormalizeMAC("address", bad)
		var ife *baremetal.InvalidFieldError
		if !errors.As(err, &ife) || ife.Field != "address" {
			t.Errorf("NormalizeMAC(%q) = %v, want InvalidFieldError on address", bad, err)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	n := secretNode()
	yes := true
	n.AutomatedClean = &yes
	n.Traits = []string{"CUSTOM_A"}
	c := n.Clone()
	c.DriverInfo["nested"].(map[string]any)["list"].([]any)[0].(map[string]any)["auth_token"] = "changed"
	c.Traits[0] = "CUSTOM_B"
	*c.AutomatedClean = false
	if n.DriverInfo["nested"].(map[string]any)["list"].([]any)[0].(map[string]any)["auth_token"] != "Nested-Secret-5" ||
		n.Traits[0] != "CUSTOM_A" || !*n.AutomatedClean {
		t.Fatal("Clone shares memory with the original")
	}
	if (*baremetal.Node)(nil).Clone() != nil {
		t.Fatal("nil Clone")
	}
}
