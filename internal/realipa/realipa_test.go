package realipa_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/internal/testlog"
	"github.com/anvilmetal/anvil/statemachine"
)

// EnvSource names the unpacked IPA source tree; EnvPython the interpreter
// with the Debian packages IPA needs (default /usr/bin/python3).
const (
	EnvSource = "ANVIL_TEST_IPA_SRC"
	EnvPython = "ANVIL_TEST_IPA_PYTHON"
)

const testMAC = "52:54:00:a1:b2:c3"

// requireIPA returns the IPA source tree and interpreter, or skips.
func requireIPA(t testing.TB) (src, python string) {
	t.Helper()
	src = os.Getenv(EnvSource)
	if src == "" {
		t.Skip(EnvSource + " not set: real IPA test skipped")
	}
	if _, err := os.Stat(filepath.Join(src, "ironic_python_agent", "agent.py")); err != nil {
		t.Fatalf("%s=%s is not an unpacked IPA source tree: %v", EnvSource, src, err)
	}
	python = os.Getenv(EnvPython)
	if python == "" {
		python = "/usr/bin/python3"
	}
	if _, err := exec.LookPath("parted"); err != nil {
		t.Fatalf("parted is not installed: IPA checks the written disk with it (%v)", err)
	}
	return src, python
}

// diskImage returns a small raw disk image with a GPT and one partition,
// what IPA's write path checks for after writing.
func diskImage(t testing.TB, dir string) []byte {
	t.Helper()
	const size = 4 << 20
	p := filepath.Join(dir, "image.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	table := &gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true,
		Partitions: []*gpt.Partition{{Index: 1, Start: 2048, End: 6143, Type: gpt.LinuxFilesystem, Name: "root"}}}
	if err := table.Write(f, size); err != nil {
		t.Fatal(err)
	}
	// Some content in the partition, so the checksum covers real data.
	if _, err := f.WriteAt(bytes.Repeat([]byte("anvil-realipa "), 1000), 2048*512); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// copyTree copies the test's Python files into dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lsblkShim writes a bin directory whose lsblk answers for the test's
// install device (a regular file, which the real lsblk refuses: IPA asks
// it for the written disk's UUID after the download, checksum check and
// write) and runs the real lsblk for anything else.
func lsblkShim(t testing.TB, dir string) string {
	t.Helper()
	real, err := exec.LookPath("lsblk")
	if err != nil {
		t.Fatalf("lsblk is not installed: %v", err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n" +
		"# Anvil realipa test double: the install device is a regular file.\n" +
		"for a in \"$@\"; do\n" +
		"  if [ \"$a\" = \"$ANVIL_IPA_INSTALL_DEVICE\" ]; then echo 'UUID=\"\" PARTUUID=\"\"'; exit 0; fi\n" +
		"done\n" +
		"exec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "lsblk"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// A second guard behind the test's stand-by extension: the host's
	// shutdown commands are never reachable through the agent's PATH.
	for _, name := range []string{"poweroff", "reboot", "shutdown", "halt"} {
		guard := "#!/bin/sh\necho \"anvil realipa: " + name + " refused on the test host\" >&2\nexit 0\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(guard), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// ipaProcess is the running agent and its log.
type ipaProcess struct {
	cmd  *exec.Cmd
	log  testlog.Buffer
	done chan struct{}
}

// logText is the agent's log with secret removed.
func (p *ipaProcess) logText(secret string) string {
	s := p.log.String()
	if secret != "" {
		s = strings.ReplaceAll(s, secret, "******")
	}
	if len(s) > 20000 {
		s = "...\n" + s[len(s)-20000:]
	}
	return s
}

// startIPA runs IPA 2023.1 from src with the test's hardware manager
// (whose NIC has mac and whose install device is device), listening on
// 127.0.0.1:port, with extra options after the test's, and stops it (by PID) when t ends. Its
// settings travel as command-line options; the agent token is never one
// of them (IPA obtains it by lookup).
func startIPA(t testing.TB, src, python, pyDir, apiURL, device, mac string, port int, extra ...string) *ipaProcess {
	t.Helper()
	home := filepath.Join(filepath.Dir(device), "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := lsblkShim(t, filepath.Dir(device))
	args := []string{"-c", "import sys; sys.argv[0] = 'ironic-python-agent'; from ironic_python_agent.cmd import agent; agent.run()",
		"--api_url", apiURL,
		"--listen_host", "127.0.0.1", "--listen_port", strconv.Itoa(port),
		"--advertise_host", "127.0.0.1", "--advertise_port", strconv.Itoa(port),
		"--lookup_timeout", "120", "--lookup_interval", "1",
		"--hardware_initialization_delay", "0",
		"--image_download_connection_retries", "0",
	}
	args = append(args, extra...)
	cmd := exec.Command(python, args...)
	cmd.Dir = filepath.Dir(device)
	// A minimal environment: no proxy may send the agent's traffic
	// anywhere but 127.0.0.1.
	cmd.Env = []string{
		"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"PYTHONPATH=" + pyDir + ":" + src,
		"PBR_VERSION=9.4.3",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"ANVIL_IPA_INSTALL_DEVICE=" + device,
		"ANVIL_IPA_MAC=" + mac,
		"LANG=C.UTF-8",
	}
	p := &ipaProcess{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting IPA: %v", err)
	}
	pid := cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		// The agent and whatever it runs (its own process group, whose
		// id is its PID).
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// TestRealIPADirectDeploy deploys a node with the direct interface while
// the real IPA 2023.1 plays its ramdisk: IPA looks the node up, heartbeats
// with auto-TLS, reports its deploy steps, and accepts the image_info of
// write_image (IPA's own _validate_image_info, which refused every
// image_info Anvil sent before), downloads the image from 127.0.0.1,
// verifies its sha256 and writes it to a temporary file; the deploy
// reaches active. At tear_down_agent the conductor flushes the agent's
// disks (standby.sync, run by the real IPA) before the out-of-band power
// off (ForceOOBPowerOff: the agent's own power_off would run poweroff).
func TestRealIPADirectDeploy(t *testing.T) {
	names := deployWithRealIPA(t, true)
	if slices.Contains(names, "power_off:SUCCEEDED") {
		t.Fatalf("agent commands %v: standby.power_off sent although ForceOOBPowerOff is set", names)
	}
}

// TestRealIPASoftPowerOff is the same deploy with the agent asked to power
// the node off at tear_down_agent, in Ironic's order: the real agent runs
// standby.sync, then standby.power_off (the test's stand-by extension
// makes that a log line, so the node stays on), and the conductor powers
// the node off out of band once PowerOffWait has passed.
func TestRealIPASoftPowerOff(t *testing.T) {
	names := deployWithRealIPA(t, false)
	syncAt, offAt := slices.Index(names, "sync:SUCCEEDED"), slices.Index(names, "power_off:SUCCEEDED")
	if syncAt < 0 || offAt < syncAt {
		t.Fatalf("agent commands %v: want sync SUCCEEDED, then power_off SUCCEEDED", names)
	}
}

// deployWithRealIPA runs the deploy of TestRealIPADirectDeploy and returns
// the commands the real agent ran ("name:STATUS", in its order).
func deployWithRealIPA(t *testing.T, forceOOB bool) []string {
	t.Helper()
	src, python := requireIPA(t)
	dir, err := os.MkdirTemp("", "anvil-realipa-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pyDir := filepath.Join(dir, "python")
	copyTree(t, "testdata/python", pyDir)

	image := diskImage(t, dir)
	sum := sha256.Sum256(image)
	var downloads sync.Map
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/images/anvil-test.raw" {
			http.NotFound(w, r)
			return
		}
		downloads.Store(r.URL.Path, true)
		http.ServeContent(w, r, "anvil-test.raw", time.Time{}, bytes.NewReader(image))
	}))
	t.Cleanup(imgSrv.Close)
	device := filepath.Join(dir, "disk0")
	if err := os.WriteFile(device, make([]byte, len(image)), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindDeploy: {agentdeploy.Name, fake.Name}},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	apiURL := "http://" + api.Listener.Addr().String()
	condLog := &testlog.Buffer{}
	c, err := conductor.New(store, reg,
		conductor.Options{Hostname: "realipa-conductor", DisableAutomatedClean: true,
			Agent: conductor.AgentSettings{Client: client, APIURL: apiURL, ForceOOBPowerOff: forceOOB,
				PowerOffWait: 2 * time.Second, PowerOffPollInterval: 200 * time.Millisecond},
			Logger: slog.New(slog.NewTextHandler(condLog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{HeartbeatTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api.Config.Handler = h
	api.Start()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(sctx)
	})

	// A BIOS machine: its whole-disk image needs no install_bootloader,
	// which IPA's image extension would run against the host's own EFI
	// variables (the test's agent runs on the host and loads no such
	// extension).
	n, err := c.Enroll(ctx, &baremetal.Node{Name: "realipa-1", Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name,
		Properties: map[string]any{"capabilities": "boot_mode:bios"},
		InstanceInfo: map[string]any{
			"image_source": imgSrv.URL + "/images/anvil-test.raw", "image_disk_format": "raw",
			"image_os_hash_algo": "sha256", "image_os_hash_value": hex.EncodeToString(sum[:]),
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreatePort(ctx, &baremetal.Port{NodeUUID: n.UUID, Address: testMAC, PXEEnabled: true}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(want statemachine.State, timeout time.Duration, ipa *ipaProcess, secret *string) *baremetal.Node {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			cur, err := store.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.ProvisionState == want && cur.Reservation == "" {
				return cur
			}
			failed := strings.HasSuffix(string(cur.ProvisionState), "failed") || cur.ProvisionState == "error"
			if failed || time.Now().After(deadline) {
				log := ""
				if ipa != nil {
					log = ipa.logText(*secret)
				}
				t.Fatalf("node in %q (last error %q), want %q\nIPA log:\n%s", cur.ProvisionState, cur.LastError, want, log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var token string
	if err := c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	waitFor(statemachine.Manageable, 30*time.Second, nil, &token)
	if err := c.Provide(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	waitFor(statemachine.Available, 30*time.Second, nil, &token)
	if err := c.Deploy(ctx, n.UUID, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(statemachine.DeployWait, 30*time.Second, nil, &token)

	// The (fake) power-on booted "the ramdisk": the real agent starts.
	port := freePort(t)
	ipa := startIPA(t, src, python, pyDir, apiURL, device, testMAC, port)

	// Remember how to reach the agent after the deploy forgets it.
	var agent agentclient.Agent
	for deadline := time.Now().Add(90 * time.Second); ; {
		cur, err := store.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		url, _ := cur.DriverInternalInfo[driver.InternalAgentURL].(string)
		tok, _ := cur.DriverInternalInfo[driver.InternalAgentToken].(string)
		ca, _ := cur.DriverInternalInfo[driver.InternalAgentVerifyCA].(string)
		if url != "" && tok != "" {
			agent = agentclient.Agent{NodeUUID: n.UUID, URL: url, Token: tok, VerifyCA: ca}
			token = tok
			break
		}
		if cur.ProvisionState == statemachine.Active || strings.HasSuffix(string(cur.ProvisionState), "failed") || time.Now().After(deadline) {
			t.Fatalf("the agent never heartbeated (node %q, last error %q)\nIPA log:\n%s", cur.ProvisionState, cur.LastError, ipa.logText(token))
		}
		select {
		case <-ipa.done:
			t.Fatalf("IPA exited: %v\nIPA log:\n%s", ipa.cmd.ProcessState, ipa.logText(token))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(agent.URL, "https://127.0.0.1:") || agent.VerifyCA == "" {
		t.Errorf("agent URL %q with CA %t: want IPA's auto-TLS on 127.0.0.1", agent.URL, agent.VerifyCA != "")
	}
	active := waitFor(statemachine.Active, 3*time.Minute, ipa, &token)
	if active.PowerState != driver.PowerOn {
		t.Errorf("active node power %q", active.PowerState)
	}

	written, err := os.ReadFile(device)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written, image) {
		t.Fatalf("install device holds %d bytes that differ from the %d-byte image", len(written), len(image))
	}
	if _, ok := downloads.Load("/images/anvil-test.raw"); !ok {
		t.Fatal("IPA never downloaded the image")
	}

	// What the real agent ran, in its own order.
	cmds, err := client.ListCommands(ctx, agent)
	if err != nil {
		t.Fatalf("listing the agent's commands: %v", err)
	}
	var names []string
	writeAt, syncAt := -1, -1
	for i, cmd := range cmds {
		names = append(names, fmt.Sprintf("%s:%s", cmd.Name, cmd.Status))
		switch {
		case cmd.Name == "execute_deploy_step" && cmd.Status == agentclient.StatusSucceeded:
			writeAt = i
		case cmd.Name == "sync" && cmd.Status == agentclient.StatusSucceeded:
			syncAt = i
		}
	}
	t.Logf("the real agent ran %v", names)
	if writeAt < 0 || syncAt < writeAt {
		t.Fatalf("agent commands %v: want write_image SUCCEEDED, then sync SUCCEEDED", names)
	}
	// The token never travels in a process's arguments or environment,
	// nor in the conductor's log.
	if strings.Contains(strings.Join(ipa.cmd.Args, " "), token) || strings.Contains(strings.Join(ipa.cmd.Env, " "), token) {
		t.Error("the agent token appears in IPA's command line or environment")
	}
	if strings.Contains(condLog.String(), token) {
		t.Error("the agent token appears in the conductor's log")
	}
	return names
}
