package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cli runs python-ironicclient's baremetal command against one anvild.
type cli struct {
	t        *testing.T
	endpoint string
	env      []string
}

func newCLI(t *testing.T, endpoint string) *cli {
	t.Helper()
	// The client caches negotiated versions per host:port under
	// ~/.cache/ironicclient: a fresh home keeps runs independent.
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	return &cli{t: t, endpoint: endpoint, env: env}
}

// run runs `baremetal --os-endpoint URL --os-auth-type none args...` and
// returns its combined output; any failure fails the test.
func (c *cli) run(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("baremetal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *cli) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--os-endpoint", c.endpoint, "--os-auth-type", "none"}, args...)
	cmd := exec.CommandContext(ctx, "baremetal", full...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// json runs a command with -f json and decodes its output.
func (c *cli) json(dst any, args ...string) {
	c.t.Helper()
	out := c.run(append(args, "-f", "json")...)
	if err := json.Unmarshal([]byte(out), dst); err != nil {
		c.t.Fatalf("baremetal %s: not JSON (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *cli) node(ident string) map[string]any {
	c.t.Helper()
	var n map[string]any
	c.json(&n, "node", "show", ident)
	return n
}

func (c *cli) field(ident, name string) any {
	c.t.Helper()
	return c.node(ident)[name]
}

// chain runs dependent steps: once one fails or is skipped, the later
// ones are skipped with its name.
type chain struct {
	t      *testing.T
	broken string
}

func (ch *chain) step(name string, fn func(t *testing.T)) {
	ch.t.Helper()
	ch.t.Run(name, func(t *testing.T) {
		if ch.broken != "" {
			t.Skipf("needs %q, which did not pass", ch.broken)
		}
		ok := false
		defer func() {
			if !ok {
				ch.broken = name
			}
		}()
		fn(t)
		ok = !t.Failed() && !t.Skipped()
	})
}

func needBaremetal(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("baremetal"); err != nil {
		t.Skip("baremetal (Debian's python3-ironicclient) is not on PATH")
	}
}

// TestBaremetalCLI drives anvild with python-ironicclient's baremetal
// command, at the version it asks for (1.78), through every call the
// issue lists, checking what the client prints.
func TestBaremetalCLI(t *testing.T) {
	needBaremetal(t)
	d := startAnvild(t)
	runCLISession(t, newCLI(t, d.URL))
}

// TestBaremetalCLINegotiates puts a proxy in front of anvild that offers
// at most 1.70: the client's request at 1.78 gets anvild's own 406 (the
// proxy only raises the requested version out of anvild's range), the
// client negotiates down to the maximum the 406 carries, and retries.
func TestBaremetalCLINegotiates(t *testing.T) {
	needBaremetal(t)
	d := startAnvild(t)
	const capMinor = 70
	target, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	requested := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		v := r.In.Header.Get("X-OpenStack-Ironic-API-Version")
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
		if minor, ok := minorOf(v); ok && minor > capMinor {
			r.Out.Header.Set("X-OpenStack-Ironic-API-Version", "1.999")
		}
	}}
	proxy.ModifyResponse = func(resp *http.Response) error {
		resp.Header.Set("X-OpenStack-Ironic-API-Maximum-Version", "1."+strconv.Itoa(capMinor))
		return nil
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	c := newCLI(t, srv.URL)
	out := c.run("--debug", "node", "list")
	if !strings.Contains(out, "406") || !strings.Contains(out, "Negotiated API version is 1.70") {
		t.Fatalf("no 406 and negotiation to 1.70 in the client's debug output:\n%s", out)
	}
	got := requested()
	if len(got) < 2 || got[0] != "1.78" || got[len(got)-1] != "1.70" {
		t.Fatalf("versions requested: %q; want 1.78 first and 1.70 after the 406", got)
	}
	// The negotiated version is cached: the next command starts at it.
	var nodes []map[string]any
	c.json(&nodes, "node", "list")
	if got = requested(); got[len(got)-1] != "1.70" {
		t.Fatalf("second command asked %q, want the cached 1.70", got[len(got)-1])
	}
	c.json(&map[string]any{}, "node", "create", "--driver", "fake-hardware", "--name", "negotiated-1")
	if st := c.field("negotiated-1", "provision_state"); st != "enroll" {
		t.Fatalf("node created at 1.70: provision_state %v, want enroll", st)
	}
}

func minorOf(v string) (int, bool) {
	rest, ok := strings.CutPrefix(v, "1.")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

func runCLISession(t *testing.T, c *cli) {
	t.Run("driver list", func(t *testing.T) {
		c.t = t
		var drivers []map[string]any
		c.json(&drivers, "driver", "list")
		found := false
		for _, d := range drivers {
			found = found || d["Supported driver(s)"] == "fake-hardware"
		}
		if !found {
			t.Fatalf("driver list lacks fake-hardware: %v", drivers)
		}
	})

	var uuid string
	ch := &chain{t: t}
	ch.step("node create", func(t *testing.T) {
		c.t = t
		var n map[string]any
		c.json(&n, "node", "create", "--driver", "fake-hardware", "--name", "cli-node-1",
			"--property", "cpus=4", "--property", "local_gb=10", "--driver-info", "fake_password=hunter2")
		uuid, _ = n["uuid"].(string)
		if uuid == "" || n["name"] != "cli-node-1" || n["provision_state"] != "enroll" || n["driver"] != "fake-hardware" {
			t.Fatalf("created node: %v", n)
		}
		if di, _ := n["driver_info"].(map[string]any); di["fake_password"] != "******" {
			t.Fatalf("driver_info password not masked: %v", n["driver_info"])
		}
	})
	ch.step("node list", func(t *testing.T) {
		c.t = t
		var nodes []map[string]any
		c.json(&nodes, "node", "list")
		if len(nodes) != 1 || nodes[0]["UUID"] != uuid || nodes[0]["Name"] != "cli-node-1" || nodes[0]["Provisioning State"] != "enroll" {
			t.Fatalf("node list: %v", nodes)
		}
		// Filtered lists go to "/v1/nodes/?...", with the slash.
		c.json(&nodes, "node", "list", "--provision-state", "enroll")
		if len(nodes) != 1 || nodes[0]["UUID"] != uuid {
			t.Fatalf("node list --provision-state enroll: %v", nodes)
		}
		c.json(&nodes, "node", "list", "--provision-state", "active")
		if len(nodes) != 0 {
			t.Fatalf("node list --provision-state active: %v", nodes)
		}
	})
	ch.step("node show", func(t *testing.T) {
		c.t = t
		n := c.node("cli-node-1")
		if n["uuid"] != uuid || n["driver"] != "fake-hardware" {
			t.Fatalf("node show by name: %v", n)
		}
		if props, _ := n["properties"].(map[string]any); fmt.Sprint(props["cpus"]) != "4" {
			t.Fatalf("properties: %v", n["properties"])
		}
	})
	ch.step("node set", func(t *testing.T) {
		c.t = t
		c.run("node", "set", "cli-node-1", "--property", "memory_mb=4096", "--extra", "rack=r1", "--description", "set by the CLI test")
		n := c.node(uuid)
		props, _ := n["properties"].(map[string]any)
		extra, _ := n["extra"].(map[string]any)
		if fmt.Sprint(props["memory_mb"]) != "4096" || extra["rack"] != "r1" || n["description"] != "set by the CLI test" {
			t.Fatalf("after node set: properties %v extra %v description %v", props, extra, n["description"])
		}
	})
	ch.step("node unset", func(t *testing.T) {
		c.t = t
		c.run("node", "unset", "cli-node-1", "--property", "cpus", "--extra", "rack", "--description")
		n := c.node(uuid)
		props, _ := n["properties"].(map[string]any)
		extra, _ := n["extra"].(map[string]any)
		if _, has := props["cpus"]; has || len(extra) != 0 || n["description"] != nil {
			t.Fatalf("after node unset: properties %v extra %v description %v", props, extra, n["description"])
		}
	})
	ch.step("node validate", func(t *testing.T) {
		c.t = t
		var ifaces []map[string]any
		c.json(&ifaces, "node", "validate", "cli-node-1")
		got := map[string]any{}
		for _, i := range ifaces {
			got[fmt.Sprint(i["Interface"])] = i["Result"]
		}
		for _, k := range []string{"power", "management", "deploy", "boot"} {
			if got[k] != true {
				t.Fatalf("validate %s: %v (all: %v)", k, got[k], ifaces)
			}
		}
	})
	ch.step("node manage", func(t *testing.T) {
		c.t = t
		c.run("node", "manage", "cli-node-1", "--wait", "60")
		if st := c.field(uuid, "provision_state"); st != "manageable" {
			t.Fatalf("provision_state %v, want manageable", st)
		}
	})
	ch.step("node provide", func(t *testing.T) {
		c.t = t
		c.run("node", "provide", "cli-node-1", "--wait", "60")
		if st := c.field(uuid, "provision_state"); st != "available" {
			t.Fatalf("provision_state %v, want available", st)
		}
	})
	ch.step("node deploy with a config drive", func(t *testing.T) {
		c.t = t
		c.run("node", "set", "cli-node-1", "--instance-info", "image_source=http://images.example/ubuntu.qcow2",
			"--instance-info", "image_checksum=0123456789abcdef0123456789abcdef")
		c.run("node", "deploy", "cli-node-1", "--config-drive", `{"meta_data": {"hostname": "cli-node-1"}, "user_data": "#cloud-config\n"}`, "--wait", "120")
		n := c.node(uuid)
		if n["provision_state"] != "active" {
			t.Fatalf("provision_state %v, want active (last_error %v)", n["provision_state"], n["last_error"])
		}
	})
	ch.step("node undeploy", func(t *testing.T) {
		c.t = t
		c.run("node", "undeploy", "cli-node-1", "--wait", "120")
		if st := c.field(uuid, "provision_state"); st != "available" {
			t.Fatalf("provision_state %v, want available", st)
		}
	})

	// The rest needs the node only.
	needNode := func(t *testing.T) {
		if uuid == "" {
			t.Skip("needs node create, which did not pass")
		}
		c.t = t
	}
	t.Run("node power on/off", func(t *testing.T) {
		needNode(t)
		c.run("node", "power", "on", "cli-node-1")
		if ps := c.field(uuid, "power_state"); ps != "power on" {
			t.Fatalf("power_state %v after power on", ps)
		}
		c.run("node", "power", "off", "cli-node-1")
		if ps := c.field(uuid, "power_state"); ps != "power off" {
			t.Fatalf("power_state %v after power off", ps)
		}
	})
	t.Run("node maintenance set/unset", func(t *testing.T) {
		needNode(t)
		c.run("node", "maintenance", "set", "cli-node-1", "--reason", "disk swap")
		n := c.node(uuid)
		if n["maintenance"] != true || n["maintenance_reason"] != "disk swap" {
			t.Fatalf("after maintenance set: %v %v", n["maintenance"], n["maintenance_reason"])
		}
		c.run("node", "maintenance", "unset", "cli-node-1")
		n = c.node(uuid)
		if n["maintenance"] != false || n["maintenance_reason"] != nil {
			t.Fatalf("after maintenance unset: %v %v", n["maintenance"], n["maintenance_reason"])
		}
	})
	t.Run("node boot device set/show", func(t *testing.T) {
		needNode(t)
		c.run("node", "boot", "device", "set", "cli-node-1", "pxe", "--persistent")
		var bd map[string]any
		c.json(&bd, "node", "boot", "device", "show", "cli-node-1")
		if bd["boot_device"] != "pxe" || bd["persistent"] != true {
			t.Fatalf("boot device show: %v", bd)
		}
		var sup map[string]any
		c.json(&sup, "node", "boot", "device", "show", "cli-node-1", "--supported")
		if !strings.Contains(fmt.Sprint(sup["supported_boot_devices"]), "pxe") {
			t.Fatalf("supported boot devices: %v", sup)
		}
	})
	t.Run("node trait add/list/remove", func(t *testing.T) {
		needNode(t)
		c.run("node", "add", "trait", "cli-node-1", "CUSTOM_GPU", "CUSTOM_RACK_A")
		if out := c.run("node", "trait", "list", "cli-node-1", "-f", "value"); strings.Fields(out)[0] != "CUSTOM_GPU" || !strings.Contains(out, "CUSTOM_RACK_A") {
			t.Fatalf("trait list: %q", out)
		}
		c.run("node", "remove", "trait", "cli-node-1", "CUSTOM_GPU")
		if out := strings.TrimSpace(c.run("node", "trait", "list", "cli-node-1", "-f", "value")); out != "CUSTOM_RACK_A" {
			t.Fatalf("trait list after remove: %q", out)
		}
		c.run("node", "remove", "trait", "cli-node-1", "--all")
		if out := strings.TrimSpace(c.run("node", "trait", "list", "cli-node-1", "-f", "value")); out != "" {
			t.Fatalf("trait list after remove --all: %q", out)
		}
	})
	t.Run("node bios setting list", func(t *testing.T) {
		needNode(t)
		var settings []map[string]any
		c.json(&settings, "node", "bios", "setting", "list", "cli-node-1")
		// fake-hardware's BIOS interface has no settings until a step
		// applies some: an empty list, as Ironic's fake bios answers.
		for _, s := range settings {
			if s["BIOS setting name"] == nil {
				t.Fatalf("bios setting without a name: %v", settings)
			}
		}
		out, err := c.try("node", "bios", "setting", "show", "cli-node-1", "NoSuchSetting")
		if err == nil || !strings.Contains(out, "NoSuchSetting") {
			t.Fatalf("bios setting show of an unknown setting: %v %q", err, out)
		}
	})
	t.Run("port create/list/delete", func(t *testing.T) {
		needNode(t)
		var p map[string]any
		c.json(&p, "port", "create", "52:54:00:12:34:56", "--node", uuid)
		pid, _ := p["uuid"].(string)
		if pid == "" || p["address"] != "52:54:00:12:34:56" || p["node_uuid"] != uuid {
			t.Fatalf("port create: %v", p)
		}
		var ports []map[string]any
		c.json(&ports, "port", "list")
		if len(ports) != 1 || ports[0]["UUID"] != pid || ports[0]["Address"] != "52:54:00:12:34:56" {
			t.Fatalf("port list: %v", ports)
		}
		c.json(&ports, "port", "list", "--node", "cli-node-1")
		if len(ports) != 1 {
			t.Fatalf("port list --node: %v", ports)
		}
		c.json(&ports, "port", "list", "--address", "52:54:00:00:00:00")
		if len(ports) != 0 {
			t.Fatalf("port list --address of another MAC: %v", ports)
		}
		c.run("port", "delete", pid)
		c.json(&ports, "port", "list")
		if len(ports) != 0 {
			t.Fatalf("port list after delete: %v", ports)
		}
	})
	t.Run("node delete", func(t *testing.T) {
		needNode(t)
		c.run("node", "delete", "cli-node-1")
		out, err := c.try("node", "show", uuid)
		if err == nil || !strings.Contains(out, "could not be found") {
			t.Fatalf("node show after delete: %v %q", err, out)
		}
	})
}
