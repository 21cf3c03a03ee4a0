package vmlab

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/imagecache/oci/ocitest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// redfishPlugin is the real plugins/redfish executable.
var redfishPlugin = &plugintest.Plugin{Package: "github.com/anvilmetal/anvil/plugins/redfish", Name: "redfish"}

// TestVMProvisionRedfish provisions one QEMU virtual machine (TCG) whose
// BMC is the lab's Redfish service backed by QMP (RedfishMachine),
// through the conductor's public API, with the real components end to
// end: the redfish hardware type served by the plugins/redfish executable
// (power and management redfish), the redfish-virtual-media boot
// interface re-mastering the IPA ramdisk's ISO (BuildIPAISO) with the
// node's parameters into its media store, served to the BMC over HTTP,
// which downloads it into the machine's virtual CD; the direct deploy and
// agent inspection with the stock IPA 2023.1 ramdisk (its DHCP address
// from Anvil's boot server on the bridge), and the whole-disk OS image.
// Phases as TestVMProvisionIPMI's first five: enroll and manage, inspect,
// provide, deploy the raw image with root device hints and a config
// drive, undeploy. It needs what that test needs and xorriso with
// ISOLINUX.
func TestVMProvisionRedfish(t *testing.T) {
	if os.Getenv(EnvVME2E) != "1" {
		t.Skip(EnvVME2E + "=1 not set: VM end-to-end provisioning test skipped")
	}
	tarball := os.Getenv(IPATarballEnv)
	if tarball == "" {
		t.Skip(IPATarballEnv + " not set: VM end-to-end provisioning test skipped")
	}
	if _, err := exec.LookPath(QEMUBinary); err != nil {
		t.Skip(QEMUBinary + " not installed (Debian package qemu-system-x86): VM end-to-end provisioning test skipped")
	}
	// The registry of the OCI phases (redfishOCIAndService), started
	// first so that a missing docker-registry skips before the VM.
	reg := ocitest.Start(t, ocitest.Options{})
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	bmc := redfishBMC()
	bmc.extra = redfishOCIAndService(reg)
	lab := startE2ELab(t, n, tarball, bmc)
	lab.run(t)
}

// redfishBMC is RedfishMachine with the redfish hardware type and the
// redfish-virtual-media boot interface.
func redfishBMC() e2eBMC {
	return e2eBMC{
		plugin: redfishPlugin,
		prepare: func(t *testing.T, lab *Lab, rd IPARamdisk, dir string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cache, err := DefaultCache()
			if err != nil {
				t.Fatal(err)
			}
			iso, err := BuildIPAISO(ctx, cache, rd)
			if errors.Is(err, ErrUnavailable) {
				t.Skip(err.Error())
			}
			if err != nil {
				t.Fatal(err)
			}
			lab.deployISO = iso.Path
			t.Logf("IPA ISO %s (built now: %v)", iso.Path, iso.Built)
			// The plugin's media store: the per-node boot ISOs, served to
			// the BMC on the host's loopback, where it listens too.
			media := filepath.Join(dir, "published")
			if err := os.Mkdir(media, 0o755); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: recordRequests(lab.tl, "media", http.FileServer(http.Dir(media))), ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
			t.Setenv("ANVIL_REDFISH_HTTP_ROOT", media)
			t.Setenv("ANVIL_REDFISH_HTTP_URL", "http://"+ln.Addr().String())
		},
		LabBMC: LabBMC{HardwareType: rfdriver.HardwareType, Boot: rfdriver.ImplVirtualMedia, Console: driver.NoConsole,
			Start: redfishStart, Node: redfishNode},
	}
}

// redfishStart starts the RedfishMachine and sets the node's driver_info
// for it.
var redfishStart = redfishStarter(RedfishMachineOptions{Name: "vm-redfish", Password: "vm-bmc-pw-2"})

// redfishStarter is a LabBMC.Start that starts a RedfishMachine with o
// (its name, password and firmware; the lab's MAC, 1 GiB, 1 vCPU, the
// lab's directory, disks and logger) and sets the node's driver_info for
// it, the lab's IPA ISO as redfish_deploy_iso.
func redfishStarter(o RedfishMachineOptions) func(ctx context.Context, lab *Lab, dir string, disks []Disk, logger *slog.Logger) (LabMachine, error) {
	return func(ctx context.Context, lab *Lab, dir string, disks []Disk, logger *slog.Logger) (LabMachine, error) {
		o := o
		o.MAC, o.MemoryMB, o.CPUs, o.Dir, o.Disks, o.Logger = e2eMAC, 1024, 1, dir, disks, logger
		m, err := StartRedfishMachine(ctx, lab.n, o)
		if err != nil {
			return nil, err
		}
		lab.bmcInfo = map[string]any{
			"redfish_address": m.URL, "redfish_username": m.Username, "redfish_password": m.Password,
			"redfish_system_id": "/redfish/v1/Systems/" + m.SystemID, "redfish_deploy_iso": lab.deployISO,
		}
		return m, nil
	}
}

// redfishNode fills the node's redfish driver, interfaces and driver_info.
func redfishNode(lab *Lab, nd *baremetal.Node) {
	nd.Name, nd.Driver = "vm-redfish-0", rfdriver.HardwareType
	nd.BootInterface, nd.ConsoleInterface = rfdriver.ImplVirtualMedia, driver.NoConsole
	nd.ManagementInterface, nd.PowerInterface = rfdriver.ImplRedfish, rfdriver.ImplRedfish
	nd.BIOSInterface, nd.FirmwareInterface = rfdriver.ImplRedfish, rfdriver.ImplRedfish
	nd.DriverInfo = lab.bmcInfo
}
