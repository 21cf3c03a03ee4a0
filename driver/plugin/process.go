package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// Status is a plugin's health as the host sees it.
type Status struct {
	Name            string
	Path            string
	Version         string
	ProtocolVersion int  // negotiated; 0 when not running
	Running         bool // a process is up
	Healthy         bool // running and the last call did not crash it
	PID             int  // 0 when not running
	Restarts        int  // processes started after the first
	Failures        int  // consecutive crashes or failed starts
	LastError       error
	RetryAt         time.Time // next start attempt when not running after a failure
	// Unavailable maps "kind/name" of each implementation that cannot work
	// on the plugin's host to the reason the plugin gave (a missing tool);
	// nil when every implementation is available. Calls to those
	// implementations fail with an error matching driver.ErrUnavailable.
	Unavailable map[string]string
}

// instance is one running plugin process.
type instance struct {
	client *goplugin.Client
	rpc    pb.DriverClient
	// session carries the calls; nil, or unary set, when the plugin
	// serves no Session and calls go as unary Invoke.
	session *session
	unary   atomic.Bool
	version int
	pid     int
	gen     int
	// sockDir is the private directory of the plugin's socket, removed
	// with the process ("" when go-plugin chose it).
	sockDir string
}

// invoke sends one call on the session, or as a unary Invoke to a plugin
// that serves no Session.
func (inst *instance) invoke(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, error) {
	if s := inst.session; s != nil && !inst.unary.Load() {
		resp, err := s.invoke(ctx, req)
		if !unimplemented(err) {
			return resp, err
		}
		inst.unary.Store(true)
		s.close()
	}
	return inst.rpc.Invoke(withTraceMetadata(ctx, req), req)
}

// kill ends the session, so that the plugin's graceful shutdown does not
// wait for it, and then the process.
func (inst *instance) kill() {
	if inst.session != nil {
		inst.session.close()
	}
	inst.client.Kill()
	if inst.sockDir != "" {
		os.RemoveAll(inst.sockDir)
	}
}

// environWithout returns the host's environment without key, which the
// caller sets.
func environWithout(key string) []string {
	env := os.Environ()
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Plugin is one supervised plugin executable. Calls start the process on
// demand; a crash fails the in-flight calls with a *CrashError and the
// process is restarted on next use, with exponential backoff after
// repeated failures.
type Plugin struct {
	host *Host
	path string
	sum  []byte // pinned sha256, nil when not pinned

	mu       sync.Mutex
	name     string
	desc     *pb.DescribeResponse
	version  int // protocol version negotiated when it described itself
	cur      *instance
	gen      int
	starts   int
	failures int
	lastErr  error
	retryAt  time.Time
	closed   bool
	healthy  bool
}

// Name returns the plugin's name (from its description, or from the
// executable name before it described itself).
func (p *Plugin) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.name
}

// Path returns the plugin executable's path.
func (p *Plugin) Path() string { return p.path }

// Status returns the plugin's current health.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{Name: p.name, Path: p.path, Failures: p.failures, LastError: p.lastErr, Healthy: p.healthy && p.cur != nil}
	if p.desc != nil {
		s.Version = p.desc.Version
		for _, i := range p.desc.Implementations {
			if i.Unavailable != "" {
				if s.Unavailable == nil {
					s.Unavailable = map[string]string{}
				}
				s.Unavailable[i.Kind+"/"+i.Name] = i.Unavailable
			}
		}
	}
	if p.starts > 1 {
		s.Restarts = p.starts - 1
	}
	if p.cur != nil {
		s.Running, s.PID, s.ProtocolVersion = true, p.cur.pid, p.cur.version
	} else if p.failures > 0 {
		s.RetryAt = p.retryAt
	}
	return s
}

// backoff returns the wait before the next start after n consecutive
// failures: none after the first, then Min doubling up to Max.
func (p *Plugin) backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := p.host.cfg.MinBackoff
	for i := 2; i < n && d < p.host.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.host.cfg.MaxBackoff)
}

// get returns a running instance, starting one if needed and allowed.
func (p *Plugin) get() (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("plugin %s: %w", p.name, ErrHostClosed)
	}
	if p.cur != nil {
		return p.cur, nil
	}
	now := p.host.cfg.Now()
	if p.failures > 0 && now.Before(p.retryAt) {
		return nil, &BackoffError{Plugin: p.name, Path: p.path, Failures: p.failures, RetryAt: p.retryAt, Err: p.lastErr}
	}
	inst, err := p.startLocked()
	if err != nil {
		p.failures++
		p.lastErr = err
		p.healthy = false
		p.retryAt = p.host.cfg.Now().Add(p.backoff(p.failures))
		return nil, &BackoffError{Plugin: p.name, Path: p.path, Failures: p.failures, RetryAt: p.retryAt, Err: err}
	}
	p.cur = inst
	p.healthy = true
	return inst, nil
}

// startLocked starts a process and negotiates the protocol.
func (p *Plugin) startLocked() (*instance, error) {
	if p.sum != nil {
		if err := verifyChecksum(p.path, p.sum); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(p.path)
	setParentDeathSignal(cmd)
	var secure *goplugin.SecureConfig
	if p.sum != nil {
		secure = &goplugin.SecureConfig{Checksum: p.sum, Hash: sha256.New()}
	}
	// Where the kernel authenticates the two ends (see "Transport
	// security" in the package documentation), the plugin listens in a
	// directory only the host's user can enter, and the connection
	// accepts only the child the host started.
	dial := dialOptions()
	var sockDir string
	if kernelAuthenticated {
		var err error
		if sockDir, err = os.MkdirTemp("", "anvil-plugin-"); err != nil {
			return nil, fmt.Errorf("plugin %s (%s): socket directory: %w", p.name, p.path, err)
		}
		cmd.Env = append(environWithout(goplugin.EnvUnixSocketDir), goplugin.EnvUnixSocketDir+"="+sockDir)
		dial = append(dial, grpc.WithTransportCredentials(hostCreds(func() int {
			if cmd.Process == nil {
				return -1
			}
			return cmd.Process.Pid
		})))
	}
	cmd.Env = append(cmd.Env, p.host.cfg.PluginEnv...)
	logger := p.host.log.Named(p.name)
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake(),
		VersionedPlugins: pluginSets(HostProtocolVersions(), nil),
		Cmd:              cmd,
		SkipHostEnv:      kernelAuthenticated, // cmd.Env holds it
		SecureConfig:     secure,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         !kernelAuthenticated,
		Logger:           logger,
		StartTimeout:     p.host.cfg.StartTimeout,
		SyncStdout:       stdoutWarner{logger},
		SyncStderr:       io.Discard,
		GRPCDialOptions:  dial,
	})
	kill := func() {
		client.Kill()
		if sockDir != "" {
			os.RemoveAll(sockDir)
		}
	}
	proto, err := client.Client()
	if err != nil {
		kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, &ChecksumError{Path: p.path, Want: hex.EncodeToString(p.sum), Got: "changed"}
		}
		return nil, fmt.Errorf("plugin %s (%s): start: %w", p.name, p.path, err)
	}
	raw, err := proto.Dispense(dispenseName)
	if err != nil {
		kill()
		return nil, fmt.Errorf("plugin %s (%s): dispense: %w", p.name, p.path, err)
	}
	p.gen++
	p.starts++
	inst := &instance{client: client, rpc: raw.(pb.DriverClient), version: client.NegotiatedVersion(), gen: p.gen, sockDir: sockDir}
	// A plugin built before Session existed answers its first call with
	// UNIMPLEMENTED, and invoke then sends calls as unary Invoke.
	if inst.session, err = openSession(inst.rpc, &p.host.wg); err != nil {
		inst.session = nil
	}
	if rc := client.ReattachConfig(); rc != nil {
		inst.pid = rc.Pid
	}
	return inst, nil
}

// crashed retires inst after a transport failure: it is killed in the
// background (the host waits for that on Close) and the next call starts
// a new process.
func (p *Plugin) crashed(inst *instance, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil || p.cur.gen != inst.gen {
		return // another caller already handled this instance
	}
	p.cur = nil
	p.failures++
	p.lastErr = err
	p.healthy = false
	p.retryAt = p.host.cfg.Now().Add(p.backoff(p.failures))
	p.host.wg.Add(1)
	go func() {
		defer p.host.wg.Done()
		inst.kill()
	}()
}

func (p *Plugin) succeeded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = 0
	p.healthy = true
}

// stop kills the running process, if any, and refuses further calls.
func (p *Plugin) stop() {
	p.mu.Lock()
	p.closed = true
	inst := p.cur
	p.cur = nil
	p.mu.Unlock()
	if inst != nil {
		inst.kill()
	}
}

// describe asks the plugin what it provides and caches the answer.
func (p *Plugin) describe(ctx context.Context) (*pb.DescribeResponse, int, error) {
	inst, err := p.get()
	if err != nil {
		return nil, 0, err
	}
	resp, err := inst.rpc.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		if cerr := p.transportError(ctx, inst, "describe", err); cerr != nil {
			return nil, 0, cerr
		}
		return nil, 0, fmt.Errorf("plugin %s (%s): describe: %w", p.Name(), p.path, err)
	}
	p.mu.Lock()
	p.desc = resp
	p.version = inst.version
	if resp.Name != "" {
		p.name = resp.Name
	}
	p.mu.Unlock()
	p.succeeded()
	return resp, inst.version, nil
}

// retriedAfterCrash says which operations the host sends again, once, to a
// fresh process when the plugin crashed while serving them: reads, and
// writes that set a state rather than change it (setting a power state or
// boot device twice lands where setting it once does; preparing or
// cleaning up a boot twice is allowed by the interfaces' contract). A
// reboot, a step, a vendor call or an NMI might have reached the hardware
// before the crash and are never repeated: their crash is the caller's to
// handle.
func retriedAfterCrash(op string) bool {
	switch op {
	case opValidate, opGetPowerState, opSetPowerState,
		opSupportedBootDevices, opGetBootDevice, opSetBootDevice,
		opGetBootMode, opSetBootMode, opGetIndicatorState, opSetIndicatorState,
		opGetSecureBootState, opGetSensorsData, opGetNodeHealth,
		opPrepareRamdisk, opCleanUpRamdisk, opPrepareInstance, opCleanUpInstance,
		opGetConsole, opShouldWriteImage:
		return true
	}
	return false
}

// invoke runs one operation through the plugin. When the process crashes
// while serving an operation listed in retriedAfterCrash, the operation
// is sent once more to the process the host starts in its place, so a
// plugin crash costs the caller a restart rather than a failed operation.
func (p *Plugin) invoke(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, int, error) {
	resp, ver, err := p.invokeOnce(ctx, req)
	if err == nil || !retriedAfterCrash(req.Operation) || !errors.Is(err, ErrPluginCrashed) || ctx.Err() != nil {
		return resp, ver, err
	}
	p.host.log.Warn("driver plugin crashed during a call that is safe to repeat; sending it to a new process",
		"plugin", p.Name(), "operation", req.Kind+"/"+req.Implementation+" "+req.Operation, "error", err)
	resp, ver, rerr := p.invokeOnce(ctx, req)
	if rerr != nil {
		return nil, 0, fmt.Errorf("%w (repeated after the crash: %w)", err, rerr)
	}
	return resp, ver, nil
}

// invokeOnce sends one operation to the running (or a newly started)
// process.
func (p *Plugin) invokeOnce(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, int, error) {
	inst, err := p.get()
	if err != nil {
		return nil, 0, err
	}
	resp, err := inst.invoke(ctx, req)
	if err != nil {
		if cerr := p.transportError(ctx, inst, req.Kind+"/"+req.Implementation+" "+req.Operation, err); cerr != nil {
			return nil, 0, cerr
		}
		return nil, 0, fmt.Errorf("plugin %s: %s/%s %s: %w", p.Name(), req.Kind, req.Implementation, req.Operation, err)
	}
	p.succeeded()
	return resp, inst.version, nil
}

// transportError classifies a failed RPC. The caller's own cancellation
// is returned as the context error; anything else on the transport means
// the process is gone or unusable: the instance is retired and a
// *CrashError returned.
func (p *Plugin) transportError(ctx context.Context, inst *instance, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("plugin %s: %s: %w", p.Name(), op, ctxErr)
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		// gRPC's deadline timer can fire just before the context's.
		return fmt.Errorf("plugin %s: %s: %w", p.Name(), op, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("plugin %s: %s: %w", p.Name(), op, context.Canceled)
	case codes.Unavailable, codes.Internal, codes.Unknown:
	default:
		return nil
	}
	p.crashed(inst, err)
	return &CrashError{Plugin: p.Name(), Path: p.path, Operation: op, Err: err}
}

// stdoutWarner logs anything a plugin writes to its stdout: plugins must
// not, so each line is a warning.
type stdoutWarner struct{ l hclog.Logger }

func (w stdoutWarner) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.l.Warn("plugin wrote to stdout", "line", line)
	}
	return len(b), nil
}

// verifyChecksum compares the file's SHA-256 with want.
func verifyChecksum(path string, want []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	got := h.Sum(nil)
	if string(got) != string(want) {
		return &ChecksumError{Path: path, Want: hex.EncodeToString(want), Got: hex.EncodeToString(got)}
	}
	return nil
}

// probeVersions runs the executable in probe mode and returns the protocol
// versions it speaks.
func probeVersions(ctx context.Context, path string) ([]int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	hs := Handshake()
	cmd.Env = append(os.Environ(), hs.MagicCookieKey+"="+hs.MagicCookieValue, probeEnv+"="+probeValue)
	setParentDeathSignal(cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("%w: probe run failed: %w (stderr: %.200s)", ErrNotAPlugin, err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		var a probeAnswer
		if json.Unmarshal([]byte(line), &a) == nil && a.Name != "" {
			return a.ProtocolVersions, a.Name, nil
		}
	}
	return nil, "", fmt.Errorf("%w: no protocol versions in probe answer (stderr: %.200s)", ErrNotAPlugin, stderr.String())
}
