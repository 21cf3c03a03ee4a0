package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/anvilmetal/anvil/driver"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/steps"
)

// probeEnv, when set to probeValue together with the magic cookie, makes
// Serve print its protocol versions as one JSON line on stderr and exit,
// so that a host can name both version lists when they do not overlap.
const (
	probeEnv   = "ANVIL_DRIVER_PLUGIN_PROBE"
	probeValue = "protocol-versions"
)

// autoMTLSClientCertEnv is where go-plugin's AutoMTLS hands a plugin the
// host's certificate; go-plugin then serves TLS.
const autoMTLSClientCertEnv = "PLUGIN_CLIENT_CERT"

// probeAnswer is what a probed plugin prints.
type probeAnswer struct {
	Name             string `json:"anvil_driver_plugin"`
	Version          string `json:"version"`
	ProtocolVersions []int  `json:"protocol_versions"`
}

// ServeConfig is what a vendor's main passes to Serve.
type ServeConfig struct {
	// Name is the plugin name; the executable should be anvil-driver-<Name>.
	Name string
	// Version is the plugin's own version, for operators.
	Version string
	// Bundle holds the hardware types and implementations the plugin
	// provides; implementations are plain package driver interfaces.
	Bundle driver.Bundle
	// Logger receives the plugin's logs. Nil means an hclog JSON logger on
	// stderr at Debug level, which the host re-levels into its own logger.
	Logger hclog.Logger
	// ProtocolVersions overrides the protocol versions served (default:
	// ProtocolVersion and PreviousProtocolVersion). For tests.
	ProtocolVersions []int
	// TracerProvider records a server span of every operation a traced
	// host sends ("plugin <interface>.<operation>", a child of the host's
	// span); the implementations get its context. Nil means one exporting
	// over OTLP when the standard environment variables name an endpoint
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT;
	// service.name anvil-driver-<Name>), and none otherwise.
	TracerProvider trace.TracerProvider
}

// Serve serves cfg's implementations to an Anvil host and returns when the
// host is done with the plugin. Call it from main and nothing else: the
// plugin must not write to stdout (go-plugin owns it; stray writes are
// forwarded to the host's log as warnings). Started by hand rather than by
// a host, it prints a short explanation and exits with status 1.
//
// The plugin exits when its parent (the host) dies: the host sets a
// parent-death signal on Linux, and Serve also watches its parent process.
func Serve(cfg ServeConfig) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: cfg.Name, Level: hclog.Debug, JSONFormat: true, Output: os.Stderr})
	}
	versions := cfg.ProtocolVersions
	if len(versions) == 0 {
		versions = HostProtocolVersions()
	}
	hs := Handshake()
	if os.Getenv(probeEnv) == probeValue && os.Getenv(hs.MagicCookieKey) == hs.MagicCookieValue {
		_ = json.NewEncoder(os.Stderr).Encode(probeAnswer{Name: cfg.Name, Version: cfg.Version, ProtocolVersions: versions})
		return
	}
	if cfg.TracerProvider == nil {
		tp, shutdown, err := envTracerProvider(cfg.Name)
		if err != nil {
			logger.Warn("no trace export: the OTLP exporter could not be set up", "error", err)
		} else if tp != nil {
			cfg.TracerProvider = tp
			defer shutdown()
		}
	}
	srv, err := newServer(cfg, versions)
	if err != nil {
		logger.Error("invalid plugin configuration", "error", err)
		os.Exit(1)
	}
	stop := make(chan struct{})
	defer close(stop)
	go watchParent(stop, os.Getppid(), logger)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  hs,
		VersionedPlugins: pluginSets(versions, srv),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, serverOptions()...)
			// A host that asked for no TLS (no client certificate) is
			// authenticated by the kernel (see "Transport security").
			if kernelAuthenticated && os.Getenv(autoMTLSClientCertEnv) == "" {
				opts = append(opts, grpc.Creds(pluginCreds()))
			}
			return grpc.NewServer(opts...)
		},
		Logger: logger,
	})
}

// watchParent exits the process when the parent changes (the host died
// and the plugin was re-parented), as a portable complement to the Linux
// parent-death signal.
func watchParent(stop <-chan struct{}, parent int, logger hclog.Logger) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if os.Getppid() != parent {
				logger.Warn("host process is gone; exiting", "parent", parent)
				os.Exit(0)
			}
		}
	}
}

// server implements the Driver gRPC service over a Bundle.
type server struct {
	pb.UnimplementedDriverServer
	name     string
	version  string
	versions []int
	bundle   driver.Bundle
	impls    map[driver.Kind]map[string]driver.Interface
	tracer   trace.Tracer
}

func newServer(cfg ServeConfig, versions []int) (*server, error) {
	if cfg.Name == "" {
		return nil, errors.New("plugin: ServeConfig.Name is empty")
	}
	s := &server{name: cfg.Name, version: cfg.Version, versions: versions, bundle: cfg.Bundle, impls: map[driver.Kind]map[string]driver.Interface{},
		tracer: tracerOf(cfg.TracerProvider)}
	for _, h := range cfg.Bundle.HardwareTypes {
		if err := h.Check(); err != nil {
			return nil, err
		}
	}
	// A scratch registry applies the same checks as the host will.
	scratch := driver.NewRegistry(driver.Config{})
	for _, i := range cfg.Bundle.Implementations {
		if err := scratch.RegisterInterface(i.Kind, i.Name, i.Impl); err != nil {
			return nil, err
		}
		if s.impls[i.Kind] == nil {
			s.impls[i.Kind] = map[string]driver.Interface{}
		}
		s.impls[i.Kind][i.Name] = i.Impl
	}
	return s, nil
}

func (s *server) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return s.describe()
}

func (s *server) describe() (*pb.DescribeResponse, error) {
	out := &pb.DescribeResponse{Name: s.name, Version: s.version}
	for _, v := range s.versions {
		out.ProtocolVersions = append(out.ProtocolVersions, int32(v))
	}
	for _, h := range s.bundle.HardwareTypes {
		ph := &pb.HardwareType{Name: h.Name, SkipCompatibilityCheck: h.SkipCompatibilityCheck}
		for _, k := range driver.Kinds() {
			if names, ok := h.Supported[k]; ok {
				ph.Supported = append(ph.Supported, &pb.Supported{Kind: string(k), Names: slices.Clone(names)})
			}
		}
		out.HardwareTypes = append(out.HardwareTypes, ph)
	}
	for _, i := range s.bundle.Implementations {
		pi := &pb.Implementation{Kind: string(i.Kind), Name: i.Name}
		for _, p := range i.Impl.Properties() {
			pi.Properties = append(pi.Properties, &pb.Property{Name: p.Name, Description: p.Description, Required: p.Required})
		}
		if sp, ok := driver.As[driver.StepProvider](i.Impl); ok {
			all := map[steps.Kind][]steps.Step{}
			for _, sk := range []steps.Kind{steps.Clean, steps.Deploy, steps.Service, steps.Verify} {
				if list := sp.Steps(sk); len(list) > 0 {
					all[sk] = list
				}
			}
			if len(all) > 0 {
				b, err := json.Marshal(all)
				if err != nil {
					return nil, fmt.Errorf("plugin %s: steps of %s/%s: %w", s.name, i.Kind, i.Name, err)
				}
				pi.StepsJson = b
			}
		}
		if v, ok := i.Impl.(driver.VendorInterface); ok {
			b, err := json.Marshal(v.Methods())
			if err != nil {
				return nil, fmt.Errorf("plugin %s: vendor methods of %s: %w", s.name, i.Name, err)
			}
			pi.VendorMethodsJson = b
		}
		pi.Capabilities = advertised(i.Kind, i.Impl)
		if err := driver.Available(i.Impl); err != nil {
			pi.Unavailable = err.Error()
			var ue *driver.UnavailableError
			if errors.As(err, &ue) {
				pi.Unavailable = ue.Reason
			}
		}
		out.Implementations = append(out.Implementations, pi)
	}
	return out, nil
}

func (s *server) Invoke(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, error) {
	ctx, span := s.startServe(ctx, req)
	resp, err := s.invoke(ctx, req)
	switch {
	case err != nil:
		endSpan(span, err)
	case resp.Error != nil:
		endSpan(span, errors.New(resp.Error.Message))
	default:
		endSpan(span, nil)
	}
	return resp, err
}

func (s *server) invoke(ctx context.Context, req *pb.InvokeRequest) (*pb.InvokeResponse, error) {
	impl, ok := s.impls[driver.Kind(req.Kind)][req.Implementation]
	if !ok {
		return &pb.InvokeResponse{Error: encodeError(&driver.UnsupportedError{Kind: driver.Kind(req.Kind), Impl: req.Implementation, Operation: "any operation: not provided by plugin " + s.name})}, nil
	}
	task, err := decodeTask(req.Task)
	if err != nil {
		return &pb.InvokeResponse{Error: encodeError(fmt.Errorf("plugin %s: %w: decoding task: %w", s.name, driver.ErrInvalidParameter, err))}, nil
	}
	var args invokeArgs
	if len(req.ArgsJson) > 0 {
		if err := json.Unmarshal(req.ArgsJson, &args); err != nil {
			return &pb.InvokeResponse{Error: encodeError(fmt.Errorf("plugin %s: %w: decoding arguments: %w", s.name, driver.ErrInvalidParameter, err))}, nil
		}
	}
	result, opErr := dispatch(ctx, impl, driver.Kind(req.Kind), req.Implementation, req.Operation, task, args)
	resp := &pb.InvokeResponse{Error: encodeError(opErr)}
	// Changes travel back even when the operation failed: a driver may
	// record progress before failing.
	if resp.Changes, err = encodeChanges(task.Changes()); err != nil {
		return nil, fmt.Errorf("plugin %s: encoding changes of %s: %w", s.name, req.Operation, err)
	}
	if opErr == nil && result != nil {
		if resp.ResultJson, err = json.Marshal(result); err != nil {
			resp.Error = encodeError(fmt.Errorf("plugin %s: encoding result of %s: %w", s.name, req.Operation, err))
		}
	}
	return resp, nil
}

// Session serves the calls of one Session stream, each in its own
// goroutine as gRPC serves unary calls, and sends every reply as it is
// ready. It returns when the host ends the stream, after its calls
// returned: a reply is never sent after the handler returned.
func (s *server) Session(stream pb.Driver_SessionServer) error {
	ctx := stream.Context()
	var (
		sendMu sync.Mutex
		wg     sync.WaitGroup
		mu     sync.Mutex
		cancel = map[uint64]context.CancelFunc{}
	)
	defer func() {
		mu.Lock()
		for _, c := range cancel {
			c()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		call, err := stream.Recv()
		if err != nil {
			return nil // the host ended the stream or went away
		}
		if call.Cancel {
			mu.Lock()
			if c, ok := cancel[call.Id]; ok {
				c()
				delete(cancel, call.Id)
			}
			mu.Unlock()
			continue
		}
		if call.Request == nil { // answered as a call of no implementation
			call.Request = &pb.InvokeRequest{}
		}
		cctx, ccancel := context.WithCancel(ctx)
		if call.TimeoutNs > 0 {
			cctx, ccancel = context.WithTimeout(ctx, time.Duration(call.TimeoutNs))
		}
		mu.Lock()
		cancel[call.Id] = ccancel
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Invoke(cctx, call.Request)
			if err != nil {
				resp = &pb.InvokeResponse{Error: encodeError(err)}
			}
			mu.Lock()
			delete(cancel, call.Id)
			mu.Unlock()
			ccancel()
			sendMu.Lock()
			// A failed send means the stream is gone; Recv sees it too.
			_ = stream.Send(&pb.SessionReply{Id: call.Id, Response: resp})
			sendMu.Unlock()
		}()
	}
}

// dispatch runs one operation on impl. The result must be JSON-encodable.
func dispatch(ctx context.Context, impl driver.Interface, kind driver.Kind, name, op string, t *driver.Task, a invokeArgs) (any, error) {
	unsupported := func() error {
		return &driver.UnsupportedError{Kind: kind, Impl: name, Operation: op}
	}
	timeout := time.Duration(a.TimeoutNS)
	switch op {
	case opValidate:
		return nil, impl.Validate(ctx, t)
	case opExecuteStep:
		r, ok := driver.As[driver.StepRunner](impl)
		if !ok {
			return nil, unsupported()
		}
		var st steps.Step
		if err := json.Unmarshal(a.Step, &st); err != nil {
			return nil, fmt.Errorf("%s/%s: %w: step: %w", kind, name, driver.ErrInvalidParameter, err)
		}
		return r.ExecuteStep(ctx, t, a.StepKind, st)
	}
	switch kind {
	case driver.KindPower:
		i := impl.(driver.PowerInterface)
		switch op {
		case opGetPowerState:
			return i.GetPowerState(ctx, t)
		case opSetPowerState:
			return nil, i.SetPowerState(ctx, t, a.Target, timeout)
		case opReboot:
			return nil, i.Reboot(ctx, t, timeout)
		}
	case driver.KindManagement:
		i := impl.(driver.ManagementInterface)
		switch op {
		case opSupportedBootDevices:
			return i.SupportedBootDevices(ctx, t)
		case opSetBootDevice:
			return nil, i.SetBootDevice(ctx, t, a.Device, a.Persistent)
		case opGetBootDevice:
			return i.GetBootDevice(ctx, t)
		case opGetBootMode, opSetBootMode:
			bm, ok := driver.As[driver.BootModeManager](impl)
			if !ok {
				return nil, unsupported()
			}
			if op == opGetBootMode {
				return bm.GetBootMode(ctx, t)
			}
			return nil, bm.SetBootMode(ctx, t, a.Mode)
		case opInjectNMI:
			n, ok := driver.As[driver.NMIInjector](impl)
			if !ok {
				return nil, unsupported()
			}
			return nil, n.InjectNMI(ctx, t)
		case opGetIndicatorState, opSetIndicatorState:
			im, ok := driver.As[driver.IndicatorManager](impl)
			if !ok {
				return nil, unsupported()
			}
			if op == opGetIndicatorState {
				return im.GetIndicatorState(ctx, t)
			}
			return nil, im.SetIndicatorState(ctx, t, a.Indicator)
		case opGetSecureBootState, opSetSecureBootState:
			sb, ok := driver.As[driver.SecureBootManager](impl)
			if !ok {
				return nil, unsupported()
			}
			if op == opGetSecureBootState {
				return sb.GetSecureBootState(ctx, t)
			}
			return nil, sb.SetSecureBootState(ctx, t, a.Enabled)
		case opGetSensorsData:
			sr, ok := driver.As[driver.SensorReader](impl)
			if !ok {
				return nil, unsupported()
			}
			return sr.Sensors(ctx, t)
		case opGetNodeHealth:
			hr, ok := driver.As[driver.HealthReader](impl)
			if !ok {
				return nil, unsupported()
			}
			return hr.Health(ctx, t)
		case opAttachVirtualMedia, opDetachVirtualMedia, opGetVirtualMedia:
			vm, ok := driver.As[driver.VirtualMediaManager](impl)
			if !ok {
				return nil, unsupported()
			}
			switch op {
			case opAttachVirtualMedia:
				return nil, vm.AttachVirtualMedia(ctx, t, a.VMediaDevice, a.ImageURL)
			case opDetachVirtualMedia:
				return nil, vm.DetachVirtualMedia(ctx, t, a.VMediaDevices)
			}
			return vm.VirtualMedia(ctx, t)
		}
	case driver.KindBoot:
		i := impl.(driver.BootInterface)
		switch op {
		case opPrepareRamdisk:
			return nil, i.PrepareRamdisk(ctx, t, a.Params)
		case opCleanUpRamdisk:
			return nil, i.CleanUpRamdisk(ctx, t)
		case opPrepareInstance:
			return nil, i.PrepareInstance(ctx, t)
		case opCleanUpInstance:
			return nil, i.CleanUpInstance(ctx, t)
		}
	case driver.KindDeploy:
		i := impl.(driver.DeployInterface)
		switch op {
		case opPrepare:
			return nil, i.Prepare(ctx, t)
		case opDeploy:
			return i.Deploy(ctx, t)
		case opTearDown:
			return nil, i.TearDown(ctx, t)
		case opCleanUp:
			return nil, i.CleanUp(ctx, t)
		case opTakeOver:
			return nil, i.TakeOver(ctx, t)
		case opPrepareSteps, opTearDownSteps:
			sp, ok := driver.As[driver.StepPreparer](impl)
			if !ok {
				return nil, unsupported()
			}
			if op == opPrepareSteps {
				return sp.PrepareSteps(ctx, t, a.StepKind)
			}
			return nil, sp.TearDownSteps(ctx, t, a.StepKind)
		}
	case driver.KindInspect:
		i := impl.(driver.InspectInterface)
		if op == opInspectHardware {
			return i.InspectHardware(ctx, t)
		}
	case driver.KindBIOS:
		i := impl.(driver.BIOSInterface)
		if op == opCacheBIOSSettings {
			return i.CacheBIOSSettings(ctx, t)
		}
	case driver.KindRAID:
		i := impl.(driver.RAIDInterface)
		if op == opValidateRAIDConfig {
			return nil, i.ValidateRAIDConfig(ctx, t, a.Config)
		}
	case driver.KindConsole:
		i := impl.(driver.ConsoleInterface)
		switch op {
		case opStartConsole:
			return nil, i.StartConsole(ctx, t)
		case opStopConsole:
			return nil, i.StopConsole(ctx, t)
		case opGetConsole:
			return i.GetConsole(ctx, t)
		}
	case driver.KindVendor:
		i := impl.(driver.VendorInterface)
		if op == opVendorCall {
			return i.Call(ctx, t, a.Method, a.HTTPMethod, a.Args)
		}
	case driver.KindRescue:
		i := impl.(driver.RescueInterface)
		switch op {
		case opRescue:
			return i.Rescue(ctx, t)
		case opUnrescue:
			return nil, i.Unrescue(ctx, t)
		case opCleanUp:
			return nil, i.CleanUp(ctx, t)
		}
	case driver.KindFirmware:
		i := impl.(driver.FirmwareInterface)
		if op == opCacheFirmwareComponents {
			return i.CacheFirmwareComponents(ctx, t)
		}
	case driver.KindNetwork:
		i := impl.(driver.NetworkInterface)
		switch op {
		case opAddNetwork:
			return nil, i.AddNetwork(ctx, t, a.Purpose)
		case opRemoveNetwork:
			return nil, i.RemoveNetwork(ctx, t, a.Purpose)
		}
	case driver.KindStorage:
		i := impl.(driver.StorageInterface)
		switch op {
		case opAttachVolumes:
			return nil, i.AttachVolumes(ctx, t)
		case opDetachVolumes:
			return nil, i.DetachVolumes(ctx, t)
		case opShouldWriteImage:
			return i.ShouldWriteImage(ctx, t)
		}
	}
	return nil, unsupported()
}

// Operation names on the wire.
const (
	opValidate                = "validate"
	opExecuteStep             = "execute_step"
	opGetPowerState           = "get_power_state"
	opSetPowerState           = "set_power_state"
	opReboot                  = "reboot"
	opSupportedBootDevices    = "get_supported_boot_devices"
	opSetBootDevice           = "set_boot_device"
	opGetBootDevice           = "get_boot_device"
	opGetBootMode             = "get_boot_mode"
	opSetBootMode             = "set_boot_mode"
	opInjectNMI               = "inject_nmi"
	opGetIndicatorState       = "get_indicator_state"
	opSetIndicatorState       = "set_indicator_state"
	opGetSecureBootState      = "get_secure_boot_state"
	opSetSecureBootState      = "set_secure_boot_state"
	opGetSensorsData          = "get_sensors_data"
	opGetNodeHealth           = "get_node_health"
	opAttachVirtualMedia      = "attach_virtual_media"
	opDetachVirtualMedia      = "detach_virtual_media"
	opGetVirtualMedia         = "get_virtual_media"
	opPrepareRamdisk          = "prepare_ramdisk"
	opCleanUpRamdisk          = "clean_up_ramdisk"
	opPrepareInstance         = "prepare_instance"
	opCleanUpInstance         = "clean_up_instance"
	opPrepare                 = "prepare"
	opDeploy                  = "deploy"
	opTearDown                = "tear_down"
	opCleanUp                 = "clean_up"
	opTakeOver                = "take_over"
	opPrepareSteps            = "prepare_steps"
	opTearDownSteps           = "tear_down_steps"
	opInspectHardware         = "inspect_hardware"
	opCacheBIOSSettings       = "cache_bios_settings"
	opValidateRAIDConfig      = "validate_raid_config"
	opStartConsole            = "start_console"
	opStopConsole             = "stop_console"
	opGetConsole              = "get_console"
	opVendorCall              = "vendor_passthru"
	opRescue                  = "rescue"
	opUnrescue                = "unrescue"
	opCacheFirmwareComponents = "cache_firmware_components"
	opAddNetwork              = "add_network"
	opRemoveNetwork           = "remove_network"
	opAttachVolumes           = "attach_volumes"
	opDetachVolumes           = "detach_volumes"
	opShouldWriteImage        = "should_write_image"
)
