package ironicapi_test

// The requests Metal3's baremetal-operator (BMO) sends to Ironic, replayed
// through gophercloud against Anvil in the order BMO sends them, for one
// BareMetalHost going through registration, inspection, preparing,
// provisioning with a config drive, deprovisioning and deletion. The
// reference is BMO's own source (pkg/provisioner/ironic, its clients and
// hardwaredetails packages, pkg/hardwareutils/bmc, and the host state
// machine in internal/controller/metal3.io), read at commit 02aa5059e348;
// nothing here is taken from it but the shape of the requests and the
// fields BMO reads back.
//
// # How BMO talks to Ironic
//
// The client. BMO builds one gophercloud client (noauth or http_basic) and
// pins it at 1.89, its baseline. Before using it (and again whenever its
// five-second client cache expires) it checks two things:
//
//  1. GET /v1/ (gophercloud's utils.GetSupportedMicroversions): the
//     version document must name exactly one version whose maximum is
//     1.x with x >= 89, otherwise BMO reports Ironic as not ready. It then
//     switches the client to the highest of 1.110 (deployment abort),
//     1.109 (node health), 1.95 (disable_power_off), 1.93 (virtual media
//     GET) and 1.89 that the maximum allows. Against Anvil (maximum 1.115)
//     that is 1.110, the version every later call uses: BMO knows no
//     newer version (its main of 2026-08-20, ChooseMicroversion).
//  2. GET /v1/drivers (detail=false): the list must not be empty (BMO's
//     conductor-health check). It does not look at /v1/conductors.
//
// Every reconcile of a host first runs the registration pass (below) and
// then the handler of the host's provisioning state. Most state handlers
// start with a fresh GET /v1/nodes/{uuid} (BMO caches the node only for
// one reconcile; a PATCH response replaces the cached copy, a provision
// state change drops it). Before inspecting, provisioning and
// deprovisioning, BMO checks its provisioning capacity with
// GET /v1/nodes?fields=uuid,name,provision_state,boot_interface, counting
// the nodes in cleaning, clean wait, inspecting, inspect wait, deploying,
// wait call-back and deleting whose boot interface is not virtual media.
//
// Registration (every reconcile, in every state but deleting):
//
//  1. Find the node: by the UUID BMO stored, else GET /v1/nodes/{ns~name}
//     (the node is named "<namespace>~<host name>"), then, when the host
//     name has no "~", GET /v1/nodes/{name}; a 404 is "not there". With a
//     boot MAC, GET /v1/ports?address=<mac>&fields=node_uuid,uuid,address
//     finds a node registered without a name.
//  2. If there is none, POST /v1/nodes with: driver (ipmi or redfish, from
//     the BMC address scheme), name, driver_info (the BMC's shape:
//     ipmi_address, ipmi_port as a string, ipmi_username, ipmi_password,
//     ipmi_priv_level; or redfish_address "https://host", redfish_system_id
//     when the URL has a path other than /redfish/v1, redfish_username,
//     redfish_password, redfish_verify_ca false when certificate
//     verification is disabled), the interfaces the BMC type names
//     (boot_interface ipxe; inspect_interface agent, or the BMC's own for
//     fast inspection; raid_interface no-raid for IPMI and redfish for
//     Redfish; firmware_interface redfish for Redfish; deploy_interface
//     only for live ISO or custom deploy), disable_power_off (always sent,
//     false by default) and properties {capabilities "boot_mode:uefi",
//     cpu_arch}. A 409 is retried later.
//  3. Ports, in the states where creating one cannot disturb the node
//     (enroll, manageable, available, active and the failed states): GET
//     /v1/ports?node_uuid=<uuid>&fields=node_uuid,uuid,address; for the boot
//     MAC and every NIC the last inspection found that has no port, GET
//     /v1/ports?address=<mac>&fields=... (a port of another node is an
//     error) then POST /v1/ports {node_uuid, address, pxe_enabled}.
//  4. For a node that already existed, the node PATCH of this pass
//     carries /name when it differs, the whole /driver_info (the API masks
//     the password, so BMO sends it again only when the credentials
//     secret changed or the first *_address key differs),
//     /disable_power_off and /properties/cpu_arch when they differ; and,
//     with preprovisioning network data (and no image builder),
//     /network_data when the node's differs. Rewriting driver_info drops
//     the deploy image keys; the configuration PATCH below puts them back.
//  5. By provision state: enroll without last_error and without target
//     manageable: PUT /v1/nodes/{uuid}/states/provision {"target":"manage"}
//     (202); verifying: wait; cleaning, clean wait, deploying, wait
//     call-back, inspecting: nothing; any other state: the node
//     configuration PATCH.
//
// BMO's PATCH documents are built one field at a time: "add" (which
// replaces an existing key) when the desired value differs from the
// node's, "remove" when the desired value is null and the key exists,
// nothing otherwise; an empty document is not sent. The node
// configuration PATCH sets /driver_info/deploy_kernel and
// /driver_info/deploy_ramdisk (or /driver_info/deploy_iso) from BMO's
// configuration, /automated_clean (true unless cleaning is disabled), and
// /properties/capabilities and /properties/cpu_arch.
//
// Inspection (host state inspecting; BMO's InspectHardware):
//
//  1. GET /v1/nodes/{uuid}: in manageable, GET /v1/nodes/{uuid}/inventory;
//     a 404 means "never inspected": PATCH the properties and
//     inspect_interface if they differ, then PUT .../states/provision
//     {"target":"inspect"}.
//  2. Poll GET /v1/nodes/{uuid} while inspecting or inspect wait (every 10
//     s). Inspect failed fails the host with last_error.
//  3. Back in manageable: GET /v1/nodes/{uuid}/inventory (1.81) and turn
//     it into the host's hardware details: from the inventory
//     system_vendor (manufacturer, product_name, serial_number,
//     firmware.{vendor,version,build_date}), memory.physical_mb,
//     interfaces (name, vendor, product, mac_address, ipv4_address,
//     ipv6_address, speed_mbps, pci_address), disks (name, by_path,
//     rotational, size, vendor, model, serial, wwn, wwn_with_extension,
//     wwn_vendor_extension, hctl), cpu (architecture, model_name,
//     frequency, count, flags) and hostname; from the plugin data
//     all_interfaces[<name>].pxe_enabled and parsed_lldp[<name>].
//
// The NICs found are then fed back to the registration pass, which makes
// ports for those without one. Preparing (BMO's Prepare) reads the node
// and, without RAID, BIOS or firmware changes to make, does nothing: the
// node stays manageable while the host is "available". BMO then reads
// GET /v1/nodes/{uuid}/firmware (1.86) after registration, and its
// HostFirmwareSettings controller GET /v1/nodes/{uuid}/bios?detail=True;
// both only feed other resources.
//
// Power (while available and provisioned; BMO's manageHostPower): GET
// /v1/nodes/{uuid}, power_state "power on"/"power off" is the host's
// PoweredOn. With online true and the node off: PUT .../states/power
// {"target":"power on"} (202), only when target_provision_state is empty,
// then poll while target_power_state is "power on". Power off is the same
// with "power off", or, for a reboot annotation (soft unless it says
// hard), "soft power off" with timeout 180, and "power off" when that is
// refused with 400 ("rebooting"/"soft rebooting" instead when
// disable_power_off is set); the node is then powered on again.
//
// Provisioning (BMO's Provision):
//
//  1. Manageable: PUT .../states/provision {"target":"provide"}; poll while
//     cleaning and clean wait (automated cleaning).
//  2. Available: PATCH /instance_uuid (the host's Kubernetes UID),
//     /instance_info/capabilities ({} unless secure boot),
//     /instance_info/root_device (the root device hints as Ironic hint
//     strings: "s== /dev/sda", "<in> model", ">= 100" for the size...),
//     /instance_info/image_source, /instance_info/image_disk_format when
//     given, /instance_info/image_os_hash_algo and image_os_hash_value (or
//     image_checksum for a checksum without type),
//     /driver_info/force_persistent_boot_device "Default"; removing
//     boot_iso, image_checksum and image_pull_secret if present. Then GET
//     /v1/nodes/{uuid}/validate: boot.result and deploy.result must be
//     true (their reasons are the host's error otherwise). Then PUT
//     .../states/provision {"target":"active","configdrive":{"meta_data":
//     {uuid, metal3-namespace, metal3-name, local-hostname,
//     local_hostname, name}, "network_data":{...}, "user_data":"..."}}
//     (deploy_steps only for custom deploy).
//  3. Poll while deploying and wait call-back; deploy failed fails the host
//     with last_error; active is done.
//
// Provisioned (BMO's Adopt, then power): GET /v1/nodes/{uuid}; active and
// not in maintenance is nothing to do.
//
// Deprovisioning (host deleted or image removed; BMO's Adopt then
// Deprovision): in active, PATCH /automated_clean when it differs from the
// host's cleaning mode, then PUT .../states/provision {"target":"deleted"};
// poll while deleting, cleaning and clean wait; manageable is provided
// again; available is done; clean failed is retried through manage (after
// DELETE .../maintenance when in maintenance).
//
// Deletion: powering off first (BMO's PowerOff, hard): in inspect wait,
// PUT .../states/provision {"target":"abort"} (and, as the inspect failed
// node keeps its target, {"target":"manage"}); in clean wait, abort a
// manual cleaning (an automated one is waited for); wait while
// inspecting or cleaning; then PUT .../states/power {"target":"power
// off"} when it is not off, failing on a last_error unless it says
// "aborted". Then BMO's Delete: in
// available or manageable, PATCH remove /instance_uuid when it is still
// set; in enroll, delete at once; in the *ing states wait; in any other
// state (active, failed states) PUT /v1/nodes/{uuid}/maintenance
// {"reason":"forcing deletion in baremetal-operator"} first. Then DELETE
// /v1/nodes/{uuid} (a 404 is fine); the next GET by UUID is a 404.
//
// # What the replay changes
//
// The driver is fake-hardware, not ipmi or redfish, and the interfaces BMO
// names that fake-hardware does not have are swapped for its fake ones
// (boot ipxe, firmware and raid redfish); inspect_interface agent and
// raid_interface no-raid are sent as BMO sends them. driver_info keeps
// BMO's ipmi_* and redfish_* shapes with TEST-NET addresses nothing
// connects to. The lab enables Anvil's agent inspect interface, the direct
// deploy interface as the default deploy interface (as metal3's
// ironic-image configures Ironic) and simfleet's simulated power as the
// default power interface, so inspection and deployment run with a
// simulated IPA over real HTTP on the API's own listener: the inventory
// BMO reads is the one the simulated ramdisk posted to
// /v1/continue_inspection. BMO's waits (3 to 10 s) are 10 ms. The host
// has a preprovisioningNetworkData and a networkData secret (the same
// network_data.json), rootDeviceHints {deviceName: /dev/sda,
// minSizeGigabytes: 100, rotational: false}, a qcow2 image with a sha256
// checksum, user data, online: true and automated cleaning; its BMC
// credentials are rotated once after registration and it is rebooted once
// (soft) while provisioned.
//
// # The replays
//
// TestBMOReplay runs the whole life of a host for an IPMI and a Redfish
// BMC; TestBMOReplayExternallyProvisioned adopts a running host and
// deletes it through maintenance; TestBMOReplayDeletedWhileInspecting and
// TestBMOReplayDeletedWhileDeploying delete hosts stuck in inspect wait
// and in wait call-back. Each step logs the requests it sent (go test -v
// shows the sequence as BMO sends it), and every request must be sent and
// answered at the microversion BMO chose.
//
// # Missing endpoints
//
// Several endpoints land on main separately. A call answered with the
// catch-all 404 ("The resource could not be found.") or 405 skips the rest
// of the replay, naming the call. Answers that differ from what BMO
// expects fail the step, except the differences listed in
// knownDifferences, which are logged (and fail once they disappear, so
// the list stays true).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/steps"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/drivers"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// bmoBaseline is the oldest API BMO works with; bmoVersions the versions
// it picks from, best first (clients/features.go).
const bmoBaseline = 89

var bmoVersions = []int{110, 109, 95, 93, 89}

// bmoPollTimeout bounds every wait of the replay.
const bmoPollTimeout = 60 * time.Second

// knownDifferences are the places where Anvil answers differently from
// Ironic in a way BMO reads, keyed by the id the check uses. A check whose
// id is listed logs the difference instead of failing; a listed id whose
// check passes fails the test, so the list is removed as soon as the gap
// closes.
var knownDifferences = map[string]string{}

// bmoLab is an API server on a conductor whose fake-hardware nodes inspect
// and deploy with simulated agents reaching the same listener.
type bmoLab struct {
	srv   *httptest.Server
	c     *conductor.Conductor
	fleet *simfleet.Fleet

	mu     sync.Mutex
	agents map[string][]*agenttest.Agent
}

// executed is every command the simulated agents of node ran, over all
// its boots.
func (l *bmoLab) executed(node string) []agenttest.Execution {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []agenttest.Execution
	for _, a := range l.agents[node] {
		out = append(out, a.Executed()...)
	}
	return out
}

// bmoLabOptions adjust the simulated machines of a lab.
type bmoLabOptions struct {
	// inspection adjusts what a node's inspection ramdisk posts
	// (simfleet.Config.Inspection).
	inspection func(string, agenttest.InspectionConfig) agenttest.InspectionConfig
	// agent scripts every simulated agent at each boot.
	agent func(*agenttest.Agent)
}

func newBMOLab(t *testing.T, o bmoLabOptions) *bmoLab {
	t.Helper()
	store := sqlstoretest.OpenSQLite(t, clock.System())
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy:  {agentdeploy.Name, fake.Name},
			driver.KindPower:   {simfleet.PowerName, fake.Name},
			driver.KindInspect: {agentdeploy.InspectName, fake.Name},
			driver.KindRAID:    {driver.NoRAID, fake.Name},
		},
		DefaultInterfaces: map[driver.Kind]string{
			driver.KindDeploy: agentdeploy.Name,
			driver.KindPower:  simfleet.PowerName,
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	inspect, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, inspect); err != nil {
		t.Fatal(err)
	}
	// The listener exists before the conductor (the fleet needs its URL,
	// the conductor the fleet's power interface); it serves once the
	// handler is built.
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	apiURL := "http://" + srv.Listener.Addr().String()
	lab := &bmoLab{srv: srv, agents: map[string][]*agenttest.Agent{}}
	fc := simfleet.Config{APIURL: apiURL, Inspection: o.inspection}
	fc.Agent = func(node string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: 5 * time.Millisecond})
		if o.agent != nil {
			o.agent(a)
		}
		lab.mu.Lock()
		lab.agents[node] = append(lab.agents[node], a)
		lab.mu.Unlock()
		return a
	}
	fleet, err := simfleet.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })
	if err := reg.RegisterInterface(driver.KindPower, simfleet.PowerName, fleet.Power(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "bmo-replay",
		Agent: conductor.AgentSettings{Client: client, APIURL: apiURL}})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ironicapi.New(ironicapi.Options{Conductor: c, Drivers: reg, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	lab.c, lab.fleet = c, fleet
	return lab
}

// recorder is the HTTP transport of the replay's client: it keeps the
// trail of requests (method, path, query, status) and checks that each
// one names the microversion BMO chose and is answered at it.
type recorder struct {
	next http.RoundTripper

	mu      sync.Mutex
	version string
	trail   []string
	errs    []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	want := r.version
	r.mu.Unlock()
	resp, err := r.next.RoundTrip(req)
	line := req.Method + " " + req.URL.Path
	if req.URL.RawQuery != "" {
		line += "?" + req.URL.RawQuery
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.trail = append(r.trail, line+" → "+err.Error())
		return resp, err
	}
	r.trail = append(r.trail, fmt.Sprintf("%s → %d", line, resp.StatusCode))
	if want != "" {
		if got := req.Header.Get("X-OpenStack-Ironic-API-Version"); got != want {
			r.errs = append(r.errs, fmt.Sprintf("%s sent at version %q, want %s", line, got, want))
		}
		if got := resp.Header.Get("X-OpenStack-Ironic-API-Version"); got != want {
			r.errs = append(r.errs, fmt.Sprintf("%s answered at version %q, want %s", line, got, want))
		}
	}
	return resp, nil
}

// peek returns the trail so far.
func (r *recorder) peek() (trail, errs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.trail), slices.Clone(r.errs)
}

// take returns (and forgets) the trail and the version errors so far.
func (r *recorder) take() (trail, errs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	trail, errs = r.trail, r.errs
	r.trail, r.errs = nil, nil
	return trail, errs
}

// fold writes a trail with consecutive repeats counted.
func fold(trail []string) string {
	var b strings.Builder
	for i := 0; i < len(trail); {
		j := i
		for j < len(trail) && trail[j] == trail[i] {
			j++
		}
		b.WriteString("\n\t" + trail[i])
		if j-i > 1 {
			fmt.Fprintf(&b, " (×%d)", j-i)
		}
		i = j
	}
	return b.String()
}

// bmcShape is what BMO sends for one kind of BMC address.
type bmcShape struct {
	name string
	// address is the BareMetalHost's spec.bmc.address.
	address string
	// driverInfo is what BMO's bmc package makes of the address and the
	// credentials.
	driverInfo map[string]any
	// interfaces are the *_interface fields BMO sets at creation, as sent
	// to fake-hardware (see "What the replay changes").
	interfaces map[string]string
}

const (
	bmoUser     = "admin"
	bmoPassword = "bmc-s3cret"
)

var bmcShapes = []bmcShape{
	{
		name:    "ipmi",
		address: "ipmi://192.0.2.10:6230",
		driverInfo: map[string]any{
			"ipmi_address": "192.0.2.10", "ipmi_port": "6230", "ipmi_username": bmoUser,
			"ipmi_password": bmoPassword, "ipmi_priv_level": "ADMINISTRATOR",
		},
		// BMO: boot ipxe, inspect agent, raid no-raid.
		interfaces: map[string]string{"boot_interface": fake.Name, "inspect_interface": agentdeploy.InspectName, "raid_interface": driver.NoRAID},
	},
	{
		name:    "redfish",
		address: "redfish+https://192.0.2.11/redfish/v1/Systems/1",
		driverInfo: map[string]any{
			"redfish_address": "https://192.0.2.11", "redfish_system_id": "/redfish/v1/Systems/1",
			"redfish_username": bmoUser, "redfish_password": bmoPassword, "redfish_verify_ca": false,
		},
		// BMO: boot ipxe, firmware redfish, inspect agent, raid redfish.
		interfaces: map[string]string{"boot_interface": fake.Name, "firmware_interface": fake.Name,
			"inspect_interface": agentdeploy.InspectName, "raid_interface": fake.Name},
	},
}

// The host's settings: what a BareMetalHost and its secrets hold.
const (
	bmoNamespace    = "metal3"
	bmoDeployKernel = "http://192.0.2.1:6180/images/ironic-python-agent.kernel"
	bmoDeployRD     = "http://192.0.2.1:6180/images/ironic-python-agent.initramfs"
	bmoImageURL     = "http://192.0.2.1:6180/images/ubuntu-24.04.qcow2"
	bmoImageSHA256  = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	bmoUserData     = "#cloud-config\nssh_authorized_keys:\n  - ssh-ed25519 AAAA replay@example\n"
)

// bmoNetworkData is the host's networkData secret (OpenStack
// network_data.json) as BMO parses it; bmoPreprovNetworkData the
// preprovisioningNetworkData one.
func bmoNetworkData(mac string) map[string]any {
	return map[string]any{
		"links":    []any{map[string]any{"id": "enp1s0", "type": "phy", "ethernet_mac_address": mac}},
		"networks": []any{map[string]any{"id": "provisioning", "link": "enp1s0", "type": "ipv4_dhcp"}},
		"services": []any{},
	}
}

// bmoRootDeviceHints are the host's rootDeviceHints {deviceName:
// /dev/sda, minSizeGigabytes: 100, rotational: false} in the form BMO
// puts into instance_info/root_device.
var bmoRootDeviceHints = map[string]string{"name": "s== /dev/sda", "size": ">= 100", "rotational": "false"}

// bmoHost is the replay of one BareMetalHost: BMO's provisioner state for
// it (the stored node UUID, the node cached for one reconcile, the NICs
// inspection found) and the replay's own bookkeeping.
type bmoHost struct {
	lab   *bmoLab
	shape bmcShape
	sc    *gophercloud.ServiceClient
	rec   *recorder
	ctx   context.Context

	name, uid, bootMAC string
	nodeID             string
	cached             *nodes.Node
	nics               []string
	driverInfo         map[string]any
	credsChanged       bool
	inv                *nodes.InventoryData

	// blocked names why the remaining steps cannot run.
	blocked string
	// seen are the provision states observed, consecutive repeats folded.
	mu   sync.Mutex
	seen []string
}

// step runs one step of the replay as a subtest; once a step fails or
// meets a missing endpoint, the rest skip.
func (h *bmoHost) step(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		if h.blocked != "" {
			t.Skipf("not run: %s", h.blocked)
		}
		ok := false
		defer func() {
			if h.rec != nil {
				trail, errs := h.rec.take()
				t.Logf("requests:%s", fold(trail))
				for _, e := range errs {
					t.Error(e)
				}
			}
			if !ok && h.blocked == "" {
				h.blocked = "step " + name + " failed"
			}
		}()
		fn(t)
		ok = !t.Failed()
	})
}

// missingEndpoint reports whether err is the API's answer for a route it
// does not serve (yet).
func missingEndpoint(err error) bool {
	var ue gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ue) {
		return false
	}
	if ue.Actual == http.StatusMethodNotAllowed {
		return true
	}
	return ue.Actual == http.StatusNotFound && strings.Contains(string(ue.Body), "The resource could not be found.")
}

// must fails the step on err; a missing endpoint skips the rest of the
// replay instead.
func (h *bmoHost) must(t *testing.T, call string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if missingEndpoint(err) {
		h.blocked = call + " is not served (yet): " + err.Error()
		t.Skip(h.blocked)
	}
	t.Fatalf("%s: %v", call, err)
}

// differs checks one thing BMO reads: got should equal want. A difference
// listed in knownDifferences under id is logged instead.
func differs(t *testing.T, id, what string, got, want any) {
	t.Helper()
	same := fmt.Sprint(got) == fmt.Sprint(want)
	if known, ok := knownDifferences[id]; ok {
		if same {
			t.Errorf("known difference %s (%s) no longer occurs: %s = %v; remove it from knownDifferences", id, known, what, got)
		} else {
			t.Logf("known difference %s: %s = %v, Ironic answers %v (%s)", id, what, got, want, known)
		}
		return
	}
	if !same {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// record notes the node's provision state.
func (h *bmoHost) record(n *nodes.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := n.ProvisionState
	if len(h.seen) == 0 || h.seen[len(h.seen)-1] != s {
		h.seen = append(h.seen, s)
	}
}

// since returns the states observed from index i on.
func (h *bmoHost) since(i int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[i:])
}

func (h *bmoHost) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// reconcile starts one reconcile: BMO's per-reconcile node cache is
// dropped.
func (h *bmoHost) reconcile() { h.cached = nil }

// getNode is BMO's getNode: GET by the stored UUID, cached for the
// reconcile.
func (h *bmoHost) getNode(t *testing.T) *nodes.Node {
	t.Helper()
	if h.cached != nil {
		return h.cached
	}
	n, err := nodes.Get(h.ctx, h.sc, h.nodeID).Extract()
	h.must(t, "GET /v1/nodes/{uuid}", err)
	h.record(n)
	h.cached = n
	return n
}

// until reconciles (dropping the cache, then calling pass) until pass
// reports done, within bmoPollTimeout.
func (h *bmoHost) until(t *testing.T, what string, pass func() bool) {
	t.Helper()
	deadline := time.Now().Add(bmoPollTimeout)
	for {
		h.reconcile()
		if pass() {
			return
		}
		if t.Failed() || t.Skipped() {
			return
		}
		if time.Now().After(deadline) {
			n := h.getNode(t)
			t.Fatalf("%s: not done after %v: provision_state %q target %q power %q target %q last_error %q (states seen %v)",
				what, bmoPollTimeout, n.ProvisionState, n.TargetProvisionState, n.PowerState, n.TargetPowerState, n.LastError, h.since(0))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// updateOp is one operation of BMO's PATCH builder: add when the desired
// value differs from the current one, remove when the desired value is
// nil and the key exists, nothing otherwise.
func updateOp(path string, current map[string]any, key string, desired any) []nodes.UpdateOperation {
	cur, present := current[key]
	if desired == nil {
		if present {
			return []nodes.UpdateOperation{{Op: nodes.RemoveOp, Path: path}}
		}
		return nil
	}
	if present && fmt.Sprint(cur) == fmt.Sprint(desired) {
		return nil
	}
	return []nodes.UpdateOperation{{Op: nodes.AddOp, Path: path, Value: desired}}
}

// patch sends BMO's PATCH (nothing when ops is empty) and caches the
// answer, as tryUpdateNode does.
func (h *bmoHost) patch(t *testing.T, n *nodes.Node, ops []nodes.UpdateOperation) *nodes.Node {
	t.Helper()
	if len(ops) == 0 {
		return n
	}
	opts := make(nodes.UpdateOpts, 0, len(ops))
	for _, op := range ops {
		opts = append(opts, op)
	}
	upd, err := nodes.Update(h.ctx, h.sc, n.UUID, opts).Extract()
	h.must(t, "PATCH /v1/nodes/{uuid}", err)
	h.record(upd)
	h.cached = upd
	return upd
}

// provision is BMO's tryChangeNodeProvisionState: maintenance is lifted
// first, a 409 is "busy, later".
func (h *bmoHost) provision(t *testing.T, n *nodes.Node, opts nodes.ProvisionStateOpts) bool {
	t.Helper()
	if n.Maintenance {
		h.must(t, "DELETE /v1/nodes/{uuid}/maintenance", nodes.UnsetMaintenance(h.ctx, h.sc, n.UUID).ExtractErr())
		h.cached = nil
		return false
	}
	err := nodes.ChangeProvisionState(h.ctx, h.sc, n.UUID, opts).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return false
	}
	h.must(t, fmt.Sprintf("PUT /v1/nodes/{uuid}/states/provision {target: %s}", opts.Target), err)
	h.cached = nil
	return true
}

// power is BMO's changePower: only without a provision target; a 409 is
// "busy, later".
func (h *bmoHost) power(t *testing.T, n *nodes.Node, target nodes.TargetPowerState) bool {
	t.Helper()
	ok, err := h.tryPower(t, n, target)
	h.must(t, fmt.Sprintf("PUT /v1/nodes/{uuid}/states/power {target: %s}", target), err)
	return ok
}

// tryPower is changePower returning the error BMO looks at: a soft power
// off refused with 400 makes BMO power off hard instead. BMO gives a soft
// power off 180 s.
func (h *bmoHost) tryPower(t *testing.T, n *nodes.Node, target nodes.TargetPowerState) (bool, error) {
	t.Helper()
	if n.TargetProvisionState != "" {
		return false, nil
	}
	opts := nodes.PowerStateOpts{Target: target}
	if target == nodes.SoftPowerOff {
		opts.Timeout = 180
	}
	err := nodes.ChangePowerState(h.ctx, h.sc, n.UUID, opts).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.cached = nil
	return true, nil
}

// portFields are the fields BMO asks for when listing ports.
var portFields = []string{"node_uuid", "uuid", "address"}

func (h *bmoHost) listPorts(t *testing.T, opts ports.ListOpts) []ports.Port {
	t.Helper()
	opts.Fields = portFields
	pages, err := ports.List(h.sc, opts).AllPages(h.ctx)
	h.must(t, "GET /v1/ports", err)
	all, err := ports.ExtractPorts(pages)
	h.must(t, "GET /v1/ports (decode)", err)
	return all
}

// createPorts is BMO's createPortsForNode: the boot MAC and the NICs
// inspection found, for those without a port.
func (h *bmoHost) createPorts(t *testing.T, n *nodes.Node) {
	t.Helper()
	have := map[string]bool{}
	for _, p := range h.listPorts(t, ports.ListOpts{NodeUUID: n.UUID}) {
		if p.NodeUUID != n.UUID {
			t.Errorf("GET /v1/ports?node_uuid=%s lists port %s of node %s", n.UUID, p.Address, p.NodeUUID)
		}
		have[p.Address] = true
	}
	want := map[string]bool{}
	for _, m := range h.nics {
		want[m] = false
	}
	want[h.bootMAC] = true
	macs := make([]string, 0, len(want))
	for m := range want {
		macs = append(macs, m)
	}
	sort.Strings(macs)
	for _, mac := range macs {
		if have[mac] {
			continue
		}
		for _, p := range h.listPorts(t, ports.ListOpts{Address: mac}) {
			if p.NodeUUID != n.UUID {
				t.Fatalf("port %s belongs to node %s, not %s", mac, p.NodeUUID, n.UUID)
			}
		}
		pxe := want[mac]
		p, err := ports.Create(h.ctx, h.sc, ports.CreateOpts{NodeUUID: n.UUID, Address: mac, PXEEnabled: &pxe}).Extract()
		h.must(t, "POST /v1/ports", err)
		differs(t, "", "created port address", p.Address, mac)
		differs(t, "", "created port node_uuid", p.NodeUUID, n.UUID)
		if p.PXEEnabled != pxe {
			t.Errorf("created port pxe_enabled = %v, want %v", p.PXEEnabled, pxe)
		}
	}
}

// configureOps are BMO's node configuration PATCH (configureNode).
func (h *bmoHost) configureOps(n *nodes.Node) []nodes.UpdateOperation {
	var ops []nodes.UpdateOperation
	for _, kv := range [][2]any{{"deploy_iso", nil}, {"deploy_kernel", bmoDeployKernel}, {"deploy_ramdisk", bmoDeployRD}, {"kernel_append_params", nil}} {
		k := kv[0].(string)
		ops = append(ops, updateOp("/driver_info/"+k, n.DriverInfo, k, kv[1])...)
	}
	var ac map[string]any
	if n.AutomatedClean != nil {
		ac = map[string]any{"automated_clean": *n.AutomatedClean}
	}
	ops = append(ops, updateOp("/automated_clean", ac, "automated_clean", true)...)
	ops = append(ops, updateOp("/properties/capabilities", n.Properties, "capabilities", bmoCapabilities(n))...)
	ops = append(ops, updateOp("/properties/cpu_arch", n.Properties, "cpu_arch", "x86_64")...)
	return ops
}

// bmoCapabilities is BMO's properties/capabilities for UEFI: the node's
// capabilities with boot_mode and secure_boot replaced.
func bmoCapabilities(n *nodes.Node) string {
	var keep []string
	if n != nil {
		if s, ok := n.Properties["capabilities"].(string); ok && s != "" {
			for _, c := range strings.Split(s, ",") {
				if !strings.HasPrefix(c, "boot_mode:") && !strings.HasPrefix(c, "secure_boot:") {
					keep = append(keep, c)
				}
			}
		}
	}
	return strings.Join(append(keep, "boot_mode:uefi"), ",")
}

// register is one registration pass (BMO's Register) for a node that
// exists; it reports whether registration is complete.
func (h *bmoHost) register(t *testing.T) bool {
	t.Helper()
	return h.registerPass(t, false)
}

// bmcAddress is the first *_address key of a driver_info (BMO compares
// only that one to decide whether the BMC moved).
func bmcAddress(di map[string]any) map[string]any {
	keys := make([]string, 0, len(di))
	for k := range di {
		if strings.HasSuffix(k, "_address") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return map[string]any{}
	}
	return map[string]any{keys[0]: di[keys[0]]}
}

// registerPass is BMO's Register; created says the node was just made by
// POST /v1/nodes (BMO then skips the checks of an existing node's name,
// BMC address, credentials and disable_power_off).
func (h *bmoHost) registerPass(t *testing.T, created bool) bool {
	t.Helper()
	n := h.getNode(t)
	var ops []nodes.UpdateOperation
	if !created {
		top := map[string]any{"name": n.Name, "driver_info": n.DriverInfo, "disable_power_off": n.DisablePowerOff}
		ops = append(ops, updateOp("/name", top, "name", bmoNamespace+"~"+h.name)...)
		if h.credsChanged || fmt.Sprint(bmcAddress(n.DriverInfo)) != fmt.Sprint(bmcAddress(h.driverInfo)) {
			ops = append(ops, nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info", Value: h.driverInfo})
		}
		ops = append(ops, updateOp("/disable_power_off", top, "disable_power_off", false)...)
		ops = append(ops, updateOp("/properties/cpu_arch", n.Properties, "cpu_arch", "x86_64")...)
	}
	switch n.ProvisionState {
	case "enroll", "manageable", "available", "active", "adopt failed", "inspect failed", "clean failed", "deploy failed", "service failed", "error":
		h.createPorts(t, n)
	}
	ops = append(ops, updateOp("/network_data", map[string]any{"network_data": n.NetworkData}, "network_data", bmoNetworkData(h.bootMAC))...)
	n = h.patch(t, n, ops)
	h.credsChanged = false
	switch n.ProvisionState {
	case "enroll":
		if n.LastError != "" {
			t.Fatalf("node %s in enroll with last_error %q: BMO fails the registration", n.UUID, n.LastError)
		}
		if n.TargetProvisionState == "manageable" {
			return false
		}
		h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
		return false
	case "verifying":
		return false
	case "cleaning", "clean wait", "deploying", "wait call-back", "inspecting":
		return true
	}
	h.patch(t, n, h.configureOps(n))
	return true
}

// capacity is BMO's HasCapacity check: the list of nodes with four fields.
func (h *bmoHost) capacity(t *testing.T) {
	t.Helper()
	pages, err := nodes.List(h.sc, nodes.ListOpts{Fields: []string{"uuid,name,provision_state,boot_interface"}}).AllPages(h.ctx)
	h.must(t, "GET /v1/nodes?fields=uuid,name,provision_state,boot_interface", err)
	all, err := nodes.ExtractNodes(pages)
	h.must(t, "GET /v1/nodes (decode)", err)
	for _, n := range all {
		if n.UUID != h.nodeID {
			continue
		}
		differs(t, "", "listed name", n.Name, bmoNamespace+"~"+h.name)
		differs(t, "", "listed boot_interface", n.BootInterface, h.shape.interfaces["boot_interface"])
		if n.ProvisionState == "" {
			t.Errorf("listed node %s has no provision_state", n.UUID)
		}
		return
	}
	t.Errorf("GET /v1/nodes?fields=... does not list node %s", h.nodeID)
}

func TestBMOReplay(t *testing.T) {
	for i, shape := range bmcShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			lab := newBMOLab(t, bmoLabOptions{})
			h := &bmoHost{lab: lab, shape: shape, ctx: context.Background(),
				name: "worker-" + shape.name, uid: fmt.Sprintf("6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5%d", i),
				bootMAC: fmt.Sprintf("00:5c:52:31:3a:%02x", 0x9c+i), driverInfo: shape.driverInfo}
			h.replay(t)
		})
	}
}

func (h *bmoHost) replay(t *testing.T) {
	h.step(t, "01-client-microversion", h.stepMicroversion)
	h.step(t, "02-readiness-drivers", h.stepDrivers)
	h.step(t, "03-register-lookup", h.stepLookup)
	h.step(t, "04-register-create", h.stepCreate)
	h.step(t, "05-register-manage", h.stepManage)
	h.step(t, "05b-register-credentials-rotated", h.stepRotateCredentials)
	h.step(t, "06-register-firmware-bios", h.stepFirmwareBIOS)
	h.step(t, "07-inspect", h.stepInspect)
	h.step(t, "08-inspect-inventory", h.stepInventory)
	h.step(t, "09-prepare", h.stepPrepare)
	h.step(t, "10-available-power-on", h.stepPowerOn)
	h.step(t, "11-provision-provide", h.stepProvide)
	h.step(t, "12-provision-instance-info-validate", h.stepInstanceInfo)
	h.step(t, "13-provision-deploy-configdrive", h.stepDeploy)
	h.step(t, "14-provisioned-steady", h.stepProvisioned)
	h.step(t, "14b-provisioned-soft-reboot", h.stepSoftReboot)
	h.step(t, "15-deprovision", h.stepDeprovision)
	h.step(t, "16-power-off-before-delete", h.stepPowerOff)
	h.step(t, "17-delete", h.stepDelete)
}

// Step 1: GET /v1/ at BMO's baseline, then the version BMO picks.
func (h *bmoHost) stepMicroversion(t *testing.T) {
	sc, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: h.lab.srv.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	h.rec = &recorder{next: http.DefaultTransport}
	sc.HTTPClient = http.Client{Transport: h.rec, Timeout: 30 * time.Second}
	sc.Microversion = fmt.Sprintf("1.%d", bmoBaseline)
	mvs, err := utils.GetSupportedMicroversions(h.ctx, sc)
	h.must(t, "GET /v1/", err)
	if mvs.MaxMajor != 1 || mvs.MaxMinor < bmoBaseline {
		t.Fatalf("server maximum %d.%d: BMO refuses a server below 1.%d", mvs.MaxMajor, mvs.MaxMinor, bmoBaseline)
	}
	chosen := ""
	for _, v := range bmoVersions {
		if mvs.MaxMinor >= v {
			chosen = fmt.Sprintf("1.%d", v)
			break
		}
	}
	// BMO's best version is within Anvil's range, so it is what BMO picks.
	if ironicapi.MaxVersion.Minor < bmoVersions[0] {
		t.Fatalf("Anvil's maximum %s is below BMO's best version 1.%d", ironicapi.MaxVersion, bmoVersions[0])
	}
	differs(t, "", "microversion BMO picks against Anvil", chosen, "1.110")
	sc.Microversion = chosen
	h.rec.mu.Lock()
	h.rec.version = chosen
	h.rec.mu.Unlock()
	h.sc = sc
}

// Step 2: the conductor-health check, a non-empty driver list.
func (h *bmoHost) stepDrivers(t *testing.T) {
	count := 0
	err := drivers.ListDrivers(h.sc, drivers.ListDriversOpts{Detail: false}).EachPage(h.ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		ds, err := drivers.ExtractDrivers(p)
		count += len(ds)
		return true, err
	})
	h.must(t, "GET /v1/drivers", err)
	if count == 0 {
		t.Fatal("GET /v1/drivers is empty: BMO reports Ironic as not ready")
	}
}

// Step 3: the lookups before creating: by name twice, then by boot MAC.
func (h *bmoHost) stepLookup(t *testing.T) {
	names := []string{bmoNamespace + "~" + h.name}
	if !strings.Contains(h.name, "~") {
		names = append(names, h.name)
	}
	for _, name := range names {
		_, err := nodes.Get(h.ctx, h.sc, name).Extract()
		if missingEndpoint(err) {
			h.must(t, "GET /v1/nodes/{name}", err)
		}
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Fatalf("GET /v1/nodes/%s of an unknown node: %v, want a 404 (BMO registers on 404 only)", name, err)
		}
	}
	if ps := h.listPorts(t, ports.ListOpts{Address: h.bootMAC}); len(ps) != 0 {
		t.Fatalf("GET /v1/ports?address=%s = %+v before any port exists", h.bootMAC, ps)
	}
}

// Step 4: POST /v1/nodes with BMO's fields, then the rest of the first
// registration pass on the created node (ports, network_data, manage).
func (h *bmoHost) stepCreate(t *testing.T) {
	noPowerOff := false
	opts := nodes.CreateOpts{
		Driver:              builtin.FakeHardware,
		Name:                bmoNamespace + "~" + h.name,
		DriverInfo:          h.driverInfo,
		BIOSInterface:       h.shape.interfaces["bios_interface"],
		BootInterface:       h.shape.interfaces["boot_interface"],
		FirmwareInterface:   h.shape.interfaces["firmware_interface"],
		DeployInterface:     h.shape.interfaces["deploy_interface"],
		InspectInterface:    h.shape.interfaces["inspect_interface"],
		ManagementInterface: h.shape.interfaces["management_interface"],
		PowerInterface:      h.shape.interfaces["power_interface"],
		RAIDInterface:       h.shape.interfaces["raid_interface"],
		VendorInterface:     h.shape.interfaces["vendor_interface"],
		DisablePowerOff:     &noPowerOff,
		Properties:          map[string]any{"capabilities": bmoCapabilities(nil), "cpu_arch": "x86_64"},
	}
	n, err := nodes.Create(h.ctx, h.sc, opts).Extract()
	h.must(t, "POST /v1/nodes", err)
	if n.UUID == "" {
		t.Fatal("created node has no uuid: BMO stores it as the host's provisioning ID")
	}
	h.nodeID = n.UUID
	h.record(n)
	differs(t, "", "created name", n.Name, opts.Name)
	differs(t, "", "created provision_state", n.ProvisionState, "enroll")
	differs(t, "", "created target_provision_state", n.TargetProvisionState, "")
	differs(t, "", "created last_error", n.LastError, "")
	differs(t, "", "created disable_power_off", n.DisablePowerOff, false)
	differs(t, "", "created automated_clean", n.AutomatedClean == nil, true)
	differs(t, "", "created properties", n.Properties, opts.Properties)
	got := map[string]string{}
	for k := range h.shape.interfaces {
		got[k] = ifaceField(n, k)
	}
	differs(t, "", "created *_interface fields", got, h.shape.interfaces)
	differs(t, "", "created deploy_interface (the default)", n.DeployInterface, agentdeploy.Name)
	differs(t, "", "created power_interface (the default)", n.PowerInterface, simfleet.PowerName)
	for k, v := range h.shape.driverInfo {
		want := v
		if strings.Contains(k, "password") {
			want = "******"
		}
		differs(t, "", "created driver_info."+k, n.DriverInfo[k], want)
	}
	h.cached = n
	if h.registerPass(t, true) {
		t.Fatalf("registration done on a node in %s; BMO asks for manageable first", n.ProvisionState)
	}
	ps := h.listPorts(t, ports.ListOpts{NodeUUID: h.nodeID})
	if len(ps) != 1 || ps[0].Address != h.bootMAC {
		t.Fatalf("ports of the node after registration = %+v, want the boot MAC %s", ps, h.bootMAC)
	}
}

// ifaceField is the node's <kind>_interface field by API name.
func ifaceField(n *nodes.Node, field string) string {
	return map[string]string{
		"bios_interface": n.BIOSInterface, "boot_interface": n.BootInterface, "firmware_interface": n.FirmwareInterface,
		"deploy_interface": n.DeployInterface, "inspect_interface": n.InspectInterface, "management_interface": n.ManagementInterface,
		"power_interface": n.PowerInterface, "raid_interface": n.RAIDInterface, "vendor_interface": n.VendorInterface,
	}[field]
}

// subset checks that every state observed is one BMO expects on the way.
func subset(t *testing.T, what string, seen []string, allowed ...string) {
	t.Helper()
	for _, s := range seen {
		if !slices.Contains(allowed, s) {
			t.Errorf("%s: provision state %q observed (states %v), BMO expects only %v", what, s, seen, allowed)
		}
	}
}

// settled checks the fields BMO reads on a node that should be at rest in
// state.
func settled(t *testing.T, what string, n *nodes.Node, state string) {
	t.Helper()
	differs(t, "", what+" provision_state", n.ProvisionState, state)
	differs(t, "", what+" target_provision_state", n.TargetProvisionState, "")
	differs(t, "", what+" last_error", n.LastError, "")
	differs(t, "", what+" maintenance", n.Maintenance, false)
	differs(t, "", what+" fault", n.Fault, "")
	if n.PowerState != "power on" && n.PowerState != "power off" {
		t.Errorf("%s power_state = %q, BMO reads power on or power off", what, n.PowerState)
	}
}

// Step 5: reconciles until the node is manageable and configured.
func (h *bmoHost) stepManage(t *testing.T) {
	from := h.mark()
	h.until(t, "registration", func() bool { return h.register(t) })
	n := h.getNode(t)
	subset(t, "manage", h.since(from), "enroll", "verifying", "manageable")
	settled(t, "managed node", n, "manageable")
	differs(t, "", "configured driver_info.deploy_kernel", n.DriverInfo["deploy_kernel"], bmoDeployKernel)
	differs(t, "", "configured driver_info.deploy_ramdisk", n.DriverInfo["deploy_ramdisk"], bmoDeployRD)
	differs(t, "", "configured automated_clean", n.AutomatedClean != nil && *n.AutomatedClean, true)
	differs(t, "", "configured network_data", n.NetworkData, bmoNetworkData(h.bootMAC))
	// A second pass finds nothing to change: BMO would PATCH on every
	// reconcile otherwise.
	h.reconcile()
	n = h.getNode(t)
	if ops := h.configureOps(n); len(ops) != 0 {
		t.Errorf("configuration PATCH again after it applied: %+v (node driver_info %v properties %v)", ops, n.DriverInfo, n.Properties)
	}
}

// Step 5b: the BMC credentials secret changes: BMO writes the whole
// driver_info again (the API never shows the password, so BMO cannot
// compare it), which drops the deploy image keys; the configuration PATCH
// of the same pass puts them back.
func (h *bmoHost) stepRotateCredentials(t *testing.T) {
	const rotated = "bmc-rotated-s3cret"
	info := map[string]any{}
	pwKey := ""
	for k, v := range h.driverInfo {
		info[k] = v
		if strings.HasSuffix(k, "_password") {
			pwKey = k
			info[k] = rotated
		}
	}
	h.driverInfo, h.credsChanged = info, true
	h.reconcile()
	if !h.register(t) {
		t.Fatalf("registration of a manageable node not done in one pass")
	}
	n := h.getNode(t)
	differs(t, "", "driver_info."+pwKey+" after rotation", n.DriverInfo[pwKey], "******")
	differs(t, "", "driver_info.deploy_kernel after rotation", n.DriverInfo["deploy_kernel"], bmoDeployKernel)
	stored, err := h.lab.c.Store().GetNode(h.ctx, h.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.DriverInfo[pwKey] != rotated {
		t.Errorf("stored driver_info.%s is not the rotated password", pwKey)
	}
	h.reconcile()
	h.register(t)
	if trail, _ := h.rec.peek(); countPrefix(trail, "PATCH ") != 2 {
		t.Errorf("PATCHes of the rotation = %d, want 2 (driver_info, then the deploy image keys), none after:%s", countPrefix(trail, "PATCH "), fold(trail))
	}
}

// countPrefix counts the trail lines starting with p.
func countPrefix(trail []string, p string) int {
	c := 0
	for _, l := range trail {
		if strings.HasPrefix(l, p) {
			c++
		}
	}
	return c
}

// Step 6: what BMO reads right after registration for its firmware
// resources.
func (h *bmoHost) stepFirmwareBIOS(t *testing.T) {
	_, err := nodes.ListFirmware(h.ctx, h.sc, h.nodeID).Extract()
	h.must(t, "GET /v1/nodes/{uuid}/firmware", err)
	_, err = nodes.ListBIOSSettings(h.ctx, h.sc, h.nodeID, nodes.ListBIOSSettingsOpts{Detail: true}).Extract()
	h.must(t, "GET /v1/nodes/{uuid}/bios?detail=True", err)
}

// inventory is GET /v1/nodes/{uuid}/inventory; nil for a 404.
func (h *bmoHost) inventory(t *testing.T) *nodes.InventoryData {
	t.Helper()
	inv, err := nodes.GetInventory(h.ctx, h.sc, h.nodeID).Extract()
	if err != nil && !missingEndpoint(err) && gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil
	}
	h.must(t, "GET /v1/nodes/{uuid}/inventory", err)
	return inv
}

// Step 7: inspection, from the first inventory 404 to manageable again.
func (h *bmoHost) stepInspect(t *testing.T) {
	h.reconcile()
	h.capacity(t)
	h.register(t)
	n := h.getNode(t)
	if n.ProvisionState != "manageable" {
		t.Fatalf("node in %s before inspection, want manageable", n.ProvisionState)
	}
	if inv := h.inventory(t); inv != nil {
		t.Fatalf("a node never inspected has an inventory: %+v", inv)
	}
	// startInspection: properties and inspect_interface, then inspect.
	ops := updateOp("/properties/capabilities", n.Properties, "capabilities", bmoCapabilities(n))
	ops = append(ops, updateOp("/properties/cpu_arch", n.Properties, "cpu_arch", "x86_64")...)
	ops = append(ops, updateOp("/inspect_interface", map[string]any{"inspect_interface": n.InspectInterface}, "inspect_interface", agentdeploy.InspectName)...)
	n = h.patch(t, n, ops)
	from := h.mark()
	if !h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetInspect}) {
		t.Fatal("inspect refused with 409 on an idle manageable node")
	}
	var inv *nodes.InventoryData
	h.until(t, "inspection", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch n.ProvisionState {
		case "inspecting", "inspect wait":
			return false
		case "inspect failed":
			t.Fatalf("inspection failed: %s", n.LastError)
		case "manageable":
			inv = h.inventory(t)
			if inv == nil {
				// Not inspected yet (the state change is not visible): BMO
				// starts an inspection again here; the replay waits instead.
				return false
			}
			return true
		default:
			t.Fatalf("unexpected provision state %s during inspection", n.ProvisionState)
		}
		return false
	})
	if t.Failed() {
		return
	}
	subset(t, "inspect", h.since(from), "manageable", "inspecting", "inspect wait")
	if !slices.Contains(h.since(from), "inspecting") && !slices.Contains(h.since(from), "inspect wait") {
		t.Logf("inspection finished between two polls (states %v)", h.since(from))
	}
	settled(t, "inspected node", h.getNode(t), "manageable")
	if got := h.lab.fleet.Inspections(h.nodeID); got != 1 {
		t.Errorf("inspection ramdisk boots = %d, want 1", got)
	}
	h.inv = inv
}

// Step 8: the inventory fields BMO's hardware details are made of,
// against what the simulated ramdisk posted; then the NICs fed back to
// registration, which finds their ports made.
func (h *bmoHost) stepInventory(t *testing.T) {
	want := agenttest.DefaultInventory([]string{h.bootMAC})
	inv := h.inv.Inventory
	sv := inv.SystemVendor
	differs(t, "", "system_vendor.manufacturer", sv.Manufacturer, want.SystemVendor.Manufacturer)
	differs(t, "", "system_vendor.product_name", sv.ProductName, want.SystemVendor.ProductName)
	differs(t, "", "system_vendor.serial_number", sv.SerialNumber, want.SystemVendor.SerialNumber)
	differs(t, "", "memory.physical_mb", inv.Memory.PhysicalMb, want.Memory.PhysicalMB)
	differs(t, "", "hostname", inv.Hostname, want.Hostname)
	differs(t, "", "cpu.architecture", inv.CPU.Architecture, want.CPU.Architecture)
	differs(t, "", "cpu.model_name", inv.CPU.ModelName, want.CPU.ModelName)
	differs(t, "", "cpu.frequency", inv.CPU.Frequency, want.CPU.Frequency)
	differs(t, "", "cpu.count", inv.CPU.Count, want.CPU.Count)
	differs(t, "", "cpu.flags", inv.CPU.Flags, want.CPU.Flags)
	if len(inv.Disks) != len(want.Disks) {
		t.Fatalf("disks = %+v, want %d", inv.Disks, len(want.Disks))
	}
	for i, d := range inv.Disks {
		w := want.Disks[i]
		p := fmt.Sprintf("disks[%d].", i)
		differs(t, "", p+"name", d.Name, w.Name)
		differs(t, "", p+"by_path", d.ByPath, w.ByPath)
		differs(t, "", p+"rotational", d.Rotational, w.Rotational)
		differs(t, "", p+"size", d.Size, w.Size)
		differs(t, "", p+"vendor", d.Vendor, w.Vendor)
		differs(t, "", p+"model", d.Model, w.Model)
		differs(t, "", p+"serial", d.Serial, w.Serial)
		differs(t, "", p+"wwn", d.Wwn, w.WWN)
		differs(t, "", p+"hctl", d.Hctl, w.HCTL)
	}
	if len(inv.Interfaces) != len(want.Interfaces) {
		t.Fatalf("interfaces = %+v, want %d", inv.Interfaces, len(want.Interfaces))
	}
	for i, nic := range inv.Interfaces {
		w := want.Interfaces[i]
		p := fmt.Sprintf("interfaces[%d].", i)
		differs(t, "", p+"name", nic.Name, w.Name)
		differs(t, "", p+"mac_address", nic.MACAddress, w.MACAddress)
		differs(t, "", p+"ipv4_address", nic.IPV4Address, w.IPv4Address)
		differs(t, "", p+"ipv6_address", nic.IPV6Address, w.IPv6Address)
		differs(t, "", p+"vendor", nic.Vendor, w.Vendor)
		differs(t, "", p+"product", nic.Product, w.Product)
		differs(t, "", p+"speed_mbps", nic.SpeedMbps, w.SpeedMbps)
		h.nics = append(h.nics, nic.MACAddress)
	}
	// BMO's NIC.PXE comes from the plugin data Ironic's validate-interfaces
	// hook writes: all_interfaces.<name>.pxe_enabled, true for the NIC the
	// ramdisk booted from.
	std, err := h.inv.PluginData.AsStandardData()
	if err != nil {
		t.Errorf("plugin data is not Ironic's standard plugin data (BMO logs it and loses NIC PXE and LLDP): %v", err)
	}
	for _, nic := range inv.Interfaces {
		differs(t, "plugin-data-all-interfaces", "plugin_data.all_interfaces."+nic.Name+".pxe_enabled",
			std.AllInterfaces[nic.Name].PXEEnabled, nic.MACAddress == h.bootMAC)
	}
	// The next registration pass creates ports for NICs without one.
	h.reconcile()
	h.register(t)
	ps := h.listPorts(t, ports.ListOpts{NodeUUID: h.nodeID})
	got := make([]string, 0, len(ps))
	for _, p := range ps {
		got = append(got, p.Address)
	}
	sort.Strings(got)
	wantMACs := slices.Clone(h.nics)
	sort.Strings(wantMACs)
	differs(t, "", "ports after inspection", got, wantMACs)
}

// Step 9: preparing without RAID, BIOS or firmware work: BMO only reads
// the node.
func (h *bmoHost) stepPrepare(t *testing.T) {
	h.reconcile()
	h.register(t)
	settled(t, "prepared node", h.getNode(t), "manageable")
}

// Step 10: the host is available with online: true; BMO's power loop
// powers the node on and waits for power_state.
func (h *bmoHost) stepPowerOn(t *testing.T) {
	h.until(t, "power on", func() bool {
		h.register(t)
		n := h.getNode(t)
		if n.PowerState == "power on" {
			return true
		}
		if n.TargetPowerState == "power on" {
			return false
		}
		if n.LastError != "" {
			t.Fatalf("power on: node last_error %q (BMO fails the host)", n.LastError)
		}
		h.power(t, n, nodes.PowerOn)
		return false
	})
	n := h.getNode(t)
	settled(t, "powered node", n, "manageable")
	differs(t, "", "powered node power_state", n.PowerState, "power on")
	differs(t, "", "powered node target_power_state", n.TargetPowerState, "")
}

// Step 11: provisioning starts from manageable: provide, automated
// cleaning, available.
func (h *bmoHost) stepProvide(t *testing.T) {
	h.reconcile()
	h.capacity(t)
	from := h.mark()
	h.until(t, "provide", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch n.ProvisionState {
		case "manageable":
			h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
		case "cleaning", "clean wait":
		case "available":
			return true
		case "clean failed":
			t.Fatalf("cleaning failed: %s", n.LastError)
		default:
			t.Fatalf("unexpected provision state %s while providing", n.ProvisionState)
		}
		return false
	})
	if t.Failed() {
		return
	}
	subset(t, "provide", h.since(from), "manageable", "cleaning", "clean wait", "available")
	settled(t, "provided node", h.getNode(t), "available")
}

// instanceInfoOps are BMO's provisioning PATCH for a qcow2 image with a
// sha256 checksum (getInstanceUpdateOpts, direct deploy).
func (h *bmoHost) instanceInfoOps(n *nodes.Node) []nodes.UpdateOperation {
	ops := updateOp("/instance_uuid", map[string]any{"instance_uuid": n.InstanceUUID}, "instance_uuid", h.uid)
	ii := n.InstanceInfo
	for _, kv := range [][2]any{
		{"capabilities", map[string]string{}}, {"root_device", bmoRootDeviceHints},
		{"boot_iso", nil}, {"image_source", bmoImageURL}, {"image_disk_format", "qcow2"},
		{"image_pull_secret", nil}, {"image_checksum", nil},
		{"image_os_hash_algo", "sha256"}, {"image_os_hash_value", bmoImageSHA256},
	} {
		k := kv[0].(string)
		ops = append(ops, updateOp("/instance_info/"+k, ii, k, kv[1])...)
	}
	ops = append(ops, updateOp("/driver_info/force_persistent_boot_device", n.DriverInfo, "force_persistent_boot_device", "Default")...)
	return ops
}

// Step 12: in available, the instance PATCH and validate.
func (h *bmoHost) stepInstanceInfo(t *testing.T) {
	h.reconcile()
	h.register(t)
	n := h.getNode(t)
	n = h.patch(t, n, h.instanceInfoOps(n))
	differs(t, "", "patched instance_uuid", n.InstanceUUID, h.uid)
	differs(t, "", "patched instance_info.image_source", n.InstanceInfo["image_source"], bmoImageURL)
	differs(t, "", "patched instance_info.image_os_hash_algo", n.InstanceInfo["image_os_hash_algo"], "sha256")
	differs(t, "", "patched instance_info.image_os_hash_value", n.InstanceInfo["image_os_hash_value"], bmoImageSHA256)
	differs(t, "", "patched instance_info.root_device", n.InstanceInfo["root_device"], map[string]any{"name": "s== /dev/sda", "rotational": "false", "size": ">= 100"})
	differs(t, "", "patched driver_info.force_persistent_boot_device", n.DriverInfo["force_persistent_boot_device"], "Default")
	if ops := h.instanceInfoOps(n); len(ops) != 0 {
		t.Errorf("instance PATCH again after it applied: %+v", ops)
	}
	v, err := nodes.Validate(h.ctx, h.sc, n.UUID).Extract()
	h.must(t, "GET /v1/nodes/{uuid}/validate", err)
	if !v.Boot.Result {
		t.Errorf("validate boot: false (%s): BMO fails the host with it", v.Boot.Reason)
	}
	if !v.Deploy.Result {
		t.Errorf("validate deploy: false (%s): BMO fails the host with it", v.Deploy.Reason)
	}
}

// bmoConfigDrive is the config drive BMO sends: user data, network data
// and its default meta data.
func (h *bmoHost) bmoConfigDrive() nodes.ConfigDrive {
	return nodes.ConfigDrive{
		UserData:    bmoUserData,
		NetworkData: bmoNetworkData(h.bootMAC),
		MetaData: map[string]any{
			"uuid": h.uid, "metal3-namespace": bmoNamespace, "metal3-name": h.name,
			"local-hostname": h.name, "local_hostname": h.name, "name": h.name,
		},
	}
}

// sameImage is BMO's ironicHasSameImage for an image with a typed
// checksum.
func sameImage(n *nodes.Node) bool {
	ii := n.InstanceInfo
	return ii["image_source"] == bmoImageURL && ii["image_checksum"] == nil &&
		ii["image_os_hash_algo"] == "sha256" && ii["image_os_hash_value"] == bmoImageSHA256
}

// Step 13: deploy with the config drive, poll to active.
func (h *bmoHost) stepDeploy(t *testing.T) {
	n := h.getNode(t)
	from := h.mark()
	if !h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: h.bmoConfigDrive()}) {
		t.Fatal("deploy refused with 409 on an idle available node")
	}
	h.until(t, "deploy", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch n.ProvisionState {
		case "deploying", "wait call-back", "available":
		case "active":
			return true
		case "deploy failed":
			t.Fatalf("deploy failed (same image %v): %s", sameImage(n), n.LastError)
		default:
			t.Fatalf("unexpected provision state %s while deploying", n.ProvisionState)
		}
		return false
	})
	if t.Failed() {
		return
	}
	subset(t, "deploy", h.since(from), "available", "deploying", "wait call-back", "active")
	n = h.getNode(t)
	settled(t, "deployed node", n, "active")
	differs(t, "", "deployed power_state", n.PowerState, "power on")
	differs(t, "", "deployed instance_uuid", n.InstanceUUID, h.uid)
	differs(t, "", "deployed node keeps BMO's image fields", sameImage(n), true)
	h.checkConfigDrive(t)
}

// checkConfigDrive finds the config drive the simulated agent was given
// to write with the image and looks for BMO's user data and meta data in
// it (ISO 9660 keeps file contents as they are).
func (h *bmoHost) checkConfigDrive(t *testing.T) {
	t.Helper()
	for _, e := range h.lab.executed(h.nodeID) {
		if e.Step == nil || e.Step.Name != "write_image" {
			continue
		}
		cd, ok := e.Step.Args["configdrive"].(string)
		if !ok || cd == "" {
			t.Fatalf("write_image ran without a config drive: args %v", e.Step.Args)
		}
		raw, err := base64.StdEncoding.DecodeString(cd)
		if err != nil {
			t.Fatalf("%s: configdrive is not base64: %v", e.Command, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: configdrive is not gzipped: %v", e.Command, err)
		}
		iso, err := io.ReadAll(io.LimitReader(zr, 64<<20))
		if err != nil {
			t.Fatalf("%s: configdrive: %v", e.Command, err)
		}
		for _, want := range []string{bmoUserData, `"metal3-namespace"`, h.uid, `"ethernet_mac_address"`} {
			if !bytes.Contains(iso, []byte(want)) {
				t.Errorf("%s: the config drive image lacks %q", e.Command, want)
			}
		}
		return
	}
	var cmds []string
	for _, e := range h.lab.executed(h.nodeID) {
		cmds = append(cmds, e.Command)
	}
	t.Errorf("no agent command carried a config drive (commands %v)", cmds)
}

// Step 14: provisioned: Adopt finds an active node, the power loop finds
// it on; nothing is sent.
func (h *bmoHost) stepProvisioned(t *testing.T) {
	h.reconcile()
	h.register(t)
	n := h.getNode(t)
	settled(t, "provisioned node", n, "active")
	differs(t, "", "provisioned power_state", n.PowerState, "power on")
}

// Step 14b: a reboot annotation (soft by default): BMO's power loop
// powers the node off softly, falling back to a hard power off when the
// soft one is refused with 400, then on again.
func (h *bmoHost) stepSoftReboot(t *testing.T) {
	from := len(h.lab.fleet.PowerCalls(h.nodeID))
	soft := true
	h.until(t, "soft power off", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch {
		case n.PowerState == "power off":
			return true
		case n.TargetPowerState == "power off" || n.TargetPowerState == "soft power off":
			return false
		case n.LastError != "" && !strings.Contains(n.LastError, "aborted"):
			t.Fatalf("power off: last_error %q", n.LastError)
		}
		_, err := h.tryPower(t, n, nodes.SoftPowerOff)
		if gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
			soft = false
			t.Logf("soft power off refused with 400, BMO powers off hard: %v", err)
			h.power(t, n, nodes.PowerOff)
			return false
		}
		h.must(t, "PUT /v1/nodes/{uuid}/states/power {target: soft power off, timeout: 180}", err)
		return false
	})
	h.until(t, "power on", func() bool {
		h.register(t)
		n := h.getNode(t)
		if n.PowerState == "power on" {
			return true
		}
		if n.TargetPowerState == "" {
			h.power(t, n, nodes.PowerOn)
		}
		return false
	})
	n := h.getNode(t)
	settled(t, "rebooted node", n, "active")
	differs(t, "", "rebooted power_state", n.PowerState, "power on")
	var targets []string
	for _, c := range h.lab.fleet.PowerCalls(h.nodeID)[from:] {
		targets = append(targets, string(c.Target))
	}
	wantOff := "power off"
	if soft {
		wantOff = "soft power off"
	}
	differs(t, "", "power actions of the reboot", targets, []string{wantOff, "power on"})
}

// Step 15: the host is deleted: deprovisioning tears the deployment down
// and cleans; the node ends available.
func (h *bmoHost) stepDeprovision(t *testing.T) {
	h.reconcile()
	h.capacity(t)
	from := h.mark()
	h.until(t, "deprovision", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch n.ProvisionState {
		case "active", "deploy failed", "wait call-back":
			if n.AutomatedClean == nil || !*n.AutomatedClean {
				h.patch(t, n, updateOp("/automated_clean", nil, "automated_clean", true))
				return false
			}
			h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted})
		case "deleting", "cleaning", "clean wait":
		case "manageable":
			h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
		case "available":
			return true
		case "error", "clean failed":
			t.Fatalf("deprovisioning ended in %s: %s", n.ProvisionState, n.LastError)
		default:
			t.Fatalf("unexpected provision state %s while deprovisioning", n.ProvisionState)
		}
		return false
	})
	if t.Failed() {
		return
	}
	subset(t, "deprovision", h.since(from), "active", "wait call-back", "deploying", "deleting", "cleaning", "clean wait", "available")
	n := h.getNode(t)
	settled(t, "deprovisioned node", n, "available")
	// Ironic's tear-down forgets the instance.
	differs(t, "teardown-instance", "instance_uuid after tear-down", n.InstanceUUID, "")
	differs(t, "teardown-instance", "instance_info image_source after tear-down", n.InstanceInfo["image_source"], nil)
}

// Step 16: powering off before deleting (hard).
func (h *bmoHost) stepPowerOff(t *testing.T) {
	h.until(t, "power off", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch n.ProvisionState {
		case "inspect wait", "clean wait":
			h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetAbort})
			return false
		case "inspecting", "cleaning":
			return false
		}
		if n.PowerState == "power off" {
			return true
		}
		if n.TargetPowerState == "power off" {
			return false
		}
		if n.TargetPowerState == "" && n.LastError != "" && !strings.Contains(n.LastError, "aborted") {
			t.Fatalf("power off: last_error %q", n.LastError)
		}
		h.power(t, n, nodes.PowerOff)
		return false
	})
	differs(t, "", "powered-off node power_state", h.getNode(t).PowerState, "power off")
}

// Step 17: BMO's Delete from available, then the node is gone.
func (h *bmoHost) stepDelete(t *testing.T) {
	h.reconcile()
	n := h.getNode(t)
	switch n.ProvisionState {
	case "available", "manageable":
		if n.InstanceUUID != "" {
			h.patch(t, n, []nodes.UpdateOperation{{Op: nodes.RemoveOp, Path: "/instance_uuid"}})
		}
	default:
		t.Fatalf("node in %s at deletion, want available", n.ProvisionState)
	}
	h.must(t, "DELETE /v1/nodes/{uuid}", nodes.Delete(h.ctx, h.sc, n.UUID).ExtractErr())
	_, err := nodes.Get(h.ctx, h.sc, n.UUID).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) || missingEndpoint(err) {
		t.Errorf("GET /v1/nodes/%s after DELETE: %v, want Ironic's node 404 (BMO: already deleted)", n.UUID, err)
	}
	if ps := h.listPorts(t, ports.ListOpts{Address: h.bootMAC}); len(ps) != 0 {
		t.Errorf("ports of the deleted node remain: %+v (BMO would find them at re-registration)", ps)
	}
}

// TestBMOReplayExternallyProvisioned replays a host registered with
// externallyProvisioned: true (already running its workload) and then
// deleted: registration as above, BMO's Adopt (manageable: PUT
// .../states/provision {"target":"adopt"}, wait while adopting), the power
// loop powering it on, then the deletion of an active node: power off,
// then PUT /v1/nodes/{uuid}/maintenance with BMO's reason before DELETE
// (BMO's way to delete a node Ironic would otherwise refuse to).
func TestBMOReplayExternallyProvisioned(t *testing.T) {
	t.Parallel()
	lab := newBMOLab(t, bmoLabOptions{})
	h := &bmoHost{lab: lab, shape: bmcShapes[0], ctx: context.Background(),
		name: "controlplane-0", uid: "0d6f7a3c-1b2e-4f5a-8c9d-0e1f2a3b4c5d", bootMAC: "00:5c:52:31:3a:b0",
		driverInfo: bmcShapes[0].driverInfo}
	h.step(t, "01-client-microversion", h.stepMicroversion)
	h.step(t, "02-readiness-drivers", h.stepDrivers)
	h.step(t, "03-register-lookup", h.stepLookup)
	h.step(t, "04-register-create", h.stepCreate)
	h.step(t, "05-register-manage", h.stepManage)
	h.step(t, "06-adopt", h.stepAdopt)
	h.step(t, "07-power-on", func(t *testing.T) {
		h.until(t, "power on", func() bool {
			h.register(t)
			n := h.getNode(t)
			if n.PowerState == "power on" {
				return true
			}
			if n.TargetPowerState == "" {
				h.power(t, n, nodes.PowerOn)
			}
			return false
		})
		n := h.getNode(t)
		settled(t, "adopted node", n, "active")
		differs(t, "", "adopted power_state", n.PowerState, "power on")
	})
	h.step(t, "08-power-off-before-delete", func(t *testing.T) {
		from := len(lab.fleet.PowerCalls(h.nodeID))
		h.stepPowerOff(t)
		if calls := lab.fleet.PowerCalls(h.nodeID)[from:]; len(calls) == 0 {
			t.Errorf("no power call reached the node after PUT .../states/power {target: power off}")
		}
	})
	h.step(t, "09-delete-through-maintenance", h.stepDeleteActive)
}

// stepAdopt is BMO's Adopt for a manageable node of an externally
// provisioned host.
func (h *bmoHost) stepAdopt(t *testing.T) {
	from := h.mark()
	h.until(t, "adopt", func() bool {
		h.register(t)
		n := h.getNode(t)
		switch n.ProvisionState {
		case "manageable":
			h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetAdopt})
		case "adopting":
		case "active":
			if n.Maintenance && n.Fault == "" {
				h.must(t, "DELETE /v1/nodes/{uuid}/maintenance", nodes.UnsetMaintenance(h.ctx, h.sc, n.UUID).ExtractErr())
				return false
			}
			return true
		case "adopt failed":
			t.Fatalf("adoption failed: %s", n.LastError)
		default:
			t.Fatalf("unexpected provision state %s while adopting", n.ProvisionState)
		}
		return false
	})
	if t.Failed() {
		return
	}
	subset(t, "adopt", h.since(from), "manageable", "adopting", "active")
	settled(t, "adopted node", h.getNode(t), "active")
}

// stepDeleteActive is BMO's Delete of an active node: maintenance on with
// BMO's reason, then DELETE.
func (h *bmoHost) stepDeleteActive(t *testing.T) {
	const reason = "forcing deletion in baremetal-operator"
	deleted, refused := false, false
	defer func() {
		if _, known := knownDifferences["delete-in-maintenance"]; known && deleted && !refused {
			t.Errorf("known difference delete-in-maintenance no longer occurs: the node was deleted; remove it from knownDifferences")
		}
	}()
	h.until(t, "delete", func() bool {
		if deleted {
			_, err := nodes.Get(h.ctx, h.sc, h.nodeID).Extract()
			if gophercloud.ResponseCodeIs(err, http.StatusNotFound) && !missingEndpoint(err) {
				return true
			}
			t.Fatalf("GET /v1/nodes/%s after DELETE: %v, want Ironic's node 404", h.nodeID, err)
		}
		n := h.getNode(t)
		if n.ProvisionState != "active" {
			t.Fatalf("node in %s at deletion, want active", n.ProvisionState)
		}
		if !n.Maintenance {
			err := nodes.SetMaintenance(h.ctx, h.sc, n.UUID, nodes.MaintenanceOpts{Reason: reason}).ExtractErr()
			if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
				h.must(t, "PUT /v1/nodes/{uuid}/maintenance", err)
			}
			return false
		}
		differs(t, "", "maintenance_reason", n.MaintenanceReason, reason)
		err := nodes.Delete(h.ctx, h.sc, n.UUID).ExtractErr()
		if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			// BMO retries a 409 forever; Ironic deletes a node in
			// maintenance in any provision state.
			if _, known := knownDifferences["delete-in-maintenance"]; known {
				refused = true
				t.Logf("known difference delete-in-maintenance: DELETE of an active node in maintenance: %v; Ironic deletes it", err)
				return true
			}
			return false
		}
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) || missingEndpoint(err) {
			h.must(t, "DELETE /v1/nodes/{uuid}", err)
		}
		deleted = true
		return false
	})
}

// TestBMOReplayDeletedWhileInspecting replays a host deleted while its
// inspection waits for a ramdisk that never reports (its callback answers
// 503): BMO's power off before deletion first aborts the inspection
// (inspect wait: PUT .../states/provision {"target":"abort"}), then,
// because Ironic leaves target_provision_state set on the inspect failed
// node, moves it to manageable; the power off that follows ignores a
// last_error that says the operation was aborted. Then BMO deletes the
// manageable node.
func TestBMOReplayDeletedWhileInspecting(t *testing.T) {
	t.Parallel()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(sink.Close)
	lab := newBMOLab(t, bmoLabOptions{inspection: func(_ string, ic agenttest.InspectionConfig) agenttest.InspectionConfig {
		ic.CallbackURL = sink.URL + "/v1/continue_inspection"
		return ic
	}})
	h := &bmoHost{lab: lab, shape: bmcShapes[1], ctx: context.Background(),
		name: "worker-stuck", uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", bootMAC: "00:5c:52:31:3a:c0",
		driverInfo: bmcShapes[1].driverInfo}
	h.step(t, "01-client-microversion", h.stepMicroversion)
	h.step(t, "02-readiness-drivers", h.stepDrivers)
	h.step(t, "03-register-lookup", h.stepLookup)
	h.step(t, "04-register-create", h.stepCreate)
	h.step(t, "05-register-manage", h.stepManage)
	h.step(t, "06-inspect-waits", func(t *testing.T) {
		h.reconcile()
		h.capacity(t)
		h.register(t)
		n := h.getNode(t)
		if inv := h.inventory(t); inv != nil {
			t.Fatalf("a node never inspected has an inventory: %+v", inv)
		}
		if !h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetInspect}) {
			t.Fatal("inspect refused with 409 on an idle manageable node")
		}
		h.until(t, "inspect wait", func() bool {
			h.register(t)
			switch n := h.getNode(t); n.ProvisionState {
			case "inspecting":
				return false
			case "inspect wait":
				differs(t, "", "waiting node target_provision_state", n.TargetProvisionState, "manageable")
				return true
			default:
				t.Fatalf("provision state %s while the ramdisk cannot report, want inspect wait", n.ProvisionState)
			}
			return false
		})
	})
	h.step(t, "07-power-off-before-delete", func(t *testing.T) {
		aborted := false
		h.until(t, "power off", func() bool {
			h.register(t)
			n := h.getNode(t)
			switch n.ProvisionState {
			case "inspect wait":
				aborted = h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetAbort}) || aborted
				return false
			case "inspecting":
				return false
			case "inspect failed":
				if n.TargetProvisionState != "" {
					h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
					return false
				}
			}
			if n.PowerState == "power off" {
				return true
			}
			if n.TargetPowerState == "power off" {
				return false
			}
			if n.TargetPowerState == "" && n.LastError != "" && !strings.Contains(n.LastError, "aborted") {
				t.Fatalf("power off: last_error %q does not say aborted: BMO fails the deletion with it", n.LastError)
			}
			h.power(t, n, nodes.PowerOff)
			return false
		})
		if !aborted {
			t.Error("the inspection was never aborted")
		}
		seen := h.since(0)
		if !slices.Contains(seen, "inspect failed") {
			t.Errorf("states %v: the aborted inspection never showed inspect failed", seen)
		}
		n := h.getNode(t)
		differs(t, "", "node after abort and power off: power_state", n.PowerState, "power off")
		if !strings.Contains(n.LastError, "aborted") && n.LastError != "" {
			t.Errorf("last_error after the abort = %q, BMO expects it to say aborted", n.LastError)
		}
	})
	h.step(t, "08-delete", h.stepDelete)
}

// TestBMOReplayDeletedWhileDeploying replays a host deleted while its
// image is being written: inspection is disabled (the host has a boot
// MAC), so the host goes from registration to preparing, provisioning
// starts, and the deploy sits in wait call-back while the agent's
// write_image runs. BMO's Deprovision in wait call-back PATCHes
// automated_clean if needed and sends {"target":"deleted"}; the node
// tears down, cleans and ends available, and is deleted.
func TestBMOReplayDeletedWhileDeploying(t *testing.T) {
	t.Parallel()
	lab := newBMOLab(t, bmoLabOptions{agent: func(a *agenttest.Agent) {
		a.SetStepBehavior(steps.Deploy, "deploy", "write_image", agenttest.Behavior{Delay: time.Minute})
	}})
	h := &bmoHost{lab: lab, shape: bmcShapes[0], ctx: context.Background(),
		name: "worker-slow", uid: "3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a", bootMAC: "00:5c:52:31:3a:d0",
		driverInfo: bmcShapes[0].driverInfo}
	h.step(t, "01-client-microversion", h.stepMicroversion)
	h.step(t, "02-readiness-drivers", h.stepDrivers)
	h.step(t, "03-register-lookup", h.stepLookup)
	h.step(t, "04-register-create", h.stepCreate)
	h.step(t, "05-register-manage", h.stepManage)
	h.step(t, "06-prepare", h.stepPrepare)
	h.step(t, "07-provision-provide", h.stepProvide)
	h.step(t, "08-provision-instance-info-validate", h.stepInstanceInfo)
	h.step(t, "09-deploy-waits", func(t *testing.T) {
		n := h.getNode(t)
		if !h.provision(t, n, nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: h.bmoConfigDrive()}) {
			t.Fatal("deploy refused with 409 on an idle available node")
		}
		h.until(t, "wait call-back during write_image", func() bool {
			h.register(t)
			n := h.getNode(t)
			switch n.ProvisionState {
			case "deploying", "available":
				return false
			case "wait call-back":
				return n.DeployStep["step"] == "write_image"
			default:
				t.Fatalf("provision state %s while write_image runs, want wait call-back", n.ProvisionState)
			}
			return false
		})
		n = h.getNode(t)
		differs(t, "", "deploying node target_provision_state", n.TargetProvisionState, "active")
		differs(t, "", "deploying node deploy_step.interface", n.DeployStep["interface"], "deploy")
	})
	h.step(t, "10-deprovision", h.stepDeprovision)
	h.step(t, "11-power-off-before-delete", h.stepPowerOff)
	h.step(t, "12-delete", h.stepDelete)
}
