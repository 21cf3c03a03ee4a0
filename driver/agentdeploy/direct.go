package agentdeploy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/imagecache/oci"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/steps"
)

// Name is the implementation name of the direct deploy interface.
const Name = "direct"

// The deploy steps of the direct interface with their priorities
// (reference §3.8).
const (
	StepDeploy                = "deploy"
	StepWriteImage            = "write_image"
	StepPrepareInstanceBoot   = "prepare_instance_boot"
	StepTearDownAgent         = "tear_down_agent"
	StepSwitchToTenantNetwork = "switch_to_tenant_network"
	StepBootInstance          = "boot_instance"
)

// Driver internal info keys the direct interface reads and writes.
const (
	// DeploymentRebootKey is set while the node boots into the ramdisk
	// for the deploy (Ironic's deployment_reboot).
	DeploymentRebootKey = "deployment_reboot"
	// ImageWrittenKey records that write_image finished on the agent.
	ImageWrittenKey = "anvil_image_written"
)

// Direct is Ironic's "direct" deploy interface: the ramdisk agent writes
// the image itself (deploy.write_image in-band), and the interface's own
// deploy steps bracket it. The cross-interface work Ironic's deploy
// interface does (booting the ramdisk, powering the node, switching
// networks) is carried out by the conductor, which recognises an
// agent-based deploy interface through AgentBased and the steps' names.
//
// Direct is stateless: everything it needs comes in the Task (agent URL and
// token in driver_internal_info, image and config drive in instance_info).
type Direct struct {
	client *agentclient.Client
	o      Options
	// custom makes it the custom-agent interface (NewCustomAgent): no
	// write_image step, no image to check or fetch.
	custom bool
}

// ImageProvider is the conductor's image cache as the direct interface
// uses it (imagecache.Cache): an image's URL for one node, and the
// release of what the node holds once its image is written.
type ImageProvider interface {
	NodeImage(ctx context.Context, node string, req imagecache.Request) (imagecache.NodeImage, error)
	ReleaseNode(node string)
}

// Options configure the direct interface beyond the agent client.
type Options struct {
	// Images is the conductor's image cache; nil: image_download_source
	// "local" is refused.
	Images ImageProvider
	// OCI resolves oci:// image sources the agent downloads itself
	// (image_download_source "http"); nil is a resolver with Ironic's
	// defaults.
	OCI *oci.Resolver
	// ImageDownloadSource is the conductor's [agent]image_download_source
	// ("http" when empty), which a node's instance_info or driver_info
	// image_download_source overrides.
	ImageDownloadSource string
	// ForceRawImages is [DEFAULT]force_raw_images: the image cache
	// converts qcow2 images to raw before serving them.
	ForceRawImages bool
	// DefaultBootMode is [deploy]default_boot_mode, the boot mode of
	// nodes that name none (pxe.BootMode's order): "uefi" when empty,
	// as Ironic's default.
	DefaultBootMode netboot.Mode
	// BootloaderTimeout bounds the agent's image.install_bootloader;
	// 15 minutes when zero.
	BootloaderTimeout time.Duration
}

// New returns the direct deploy interface talking to agents through
// client, with no image cache.
func New(client *agentclient.Client) *Direct { return NewWithOptions(client, Options{}) }

// NewWithOptions returns the direct deploy interface with o.
func NewWithOptions(client *agentclient.Client, o Options) *Direct {
	if o.ImageDownloadSource == "" {
		o.ImageDownloadSource = ImageDownloadHTTP
	}
	if o.OCI == nil {
		o.OCI = oci.NewResolver(oci.Options{})
	}
	if o.DefaultBootMode == "" {
		o.DefaultBootMode = netboot.UEFI
	}
	if o.BootloaderTimeout <= 0 {
		o.BootloaderTimeout = 15 * time.Minute
	}
	return &Direct{client: client, o: o}
}

// AgentBased reports that this interface runs steps in-band through the
// agent.
func (*Direct) AgentBased() bool { return true }

// Properties returns the driver_info properties direct reads (none
// required; the boot interface reads the ramdisk's location).
func (*Direct) Properties() []driver.Property {
	return []driver.Property{
		{Name: "fast_track", Description: "Whether fast track is enabled for the node (\"true\"/\"false\"); default from the conductor. Optional."},
	}
}

// Validate checks, when the node is being deployed, that instance_info
// makes an image_info IPA accepts (see ImageInfo), and that the image
// download source is one this conductor serves.
func (d *Direct) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.ProvisionState == "deploying" && !d.custom {
		// The image_info the agent will get must be complete now: a
		// deploy that IPA would refuse at write_image fails here, before
		// the node is booted.
		return d.validateImage(t)
	}
	return nil
}

// Prepare clears the record of a previous deployment and, when the
// conductor serves the image (image_download_source "local"), has the
// image cache download it now, as Ironic does at prepare: a deploy
// whose image cannot be had fails before the node boots.
func (d *Direct) Prepare(ctx context.Context, t *driver.Task) error {
	t.DeleteDriverInternalInfo(ImageWrittenKey)
	if d.custom {
		return nil
	}
	if src, _ := d.downloadSource(t); src == ImageDownloadLocal && t.ProvisionState == "deploying" {
		_, err := d.resolveImage(ctx, t)
		return err
	}
	return nil
}

// Deploy is the core deploy step: the node must boot into the ramdisk, so
// it asks the conductor to reboot it (RebootRequested) and to wait for the
// agent (Wait), unless the agent is already up (fast track).
func (d *Direct) Deploy(_ context.Context, t *driver.Task) (driver.StepResult, error) {
	if url, ok := t.InternalString(driver.InternalAgentURL); ok && url != "" {
		if _, tok := t.InternalString(driver.InternalAgentToken); tok {
			return driver.StepResult{}, nil
		}
	}
	t.SetDriverInternalInfo(DeploymentRebootKey, true)
	return driver.StepResult{Wait: true, RebootRequested: true}, nil
}

// TearDown removes the deployment; the conductor powers the node off.
func (d *Direct) TearDown(_ context.Context, t *driver.Task) error {
	t.DeleteDriverInternalInfo(ImageWrittenKey)
	d.releaseImage(t)
	return nil
}

// CleanUp forgets what Prepare set up, the node's image URL included.
func (d *Direct) CleanUp(_ context.Context, t *driver.Task) error {
	t.DeleteDriverInternalInfo(DeploymentRebootKey)
	d.releaseImage(t)
	return nil
}

// releaseImage revokes the node's image URL of the image cache.
func (d *Direct) releaseImage(t *driver.Task) {
	if d.o.Images != nil {
		d.o.Images.ReleaseNode(t.NodeUUID)
	}
}

// TakeOver has nothing to re-establish: direct keeps no local state.
func (*Direct) TakeOver(context.Context, *driver.Task) error { return nil }

// PrepareSteps asks the conductor to boot the ramdisk and wait for the
// agent before clean or service steps, unless the agent is already up.
func (*Direct) PrepareSteps(_ context.Context, t *driver.Task, _ steps.Kind) (driver.StepResult, error) {
	if url, ok := t.InternalString(driver.InternalAgentURL); ok && url != "" {
		if _, tok := t.InternalString(driver.InternalAgentToken); tok {
			return driver.StepResult{}, nil
		}
	}
	return driver.StepResult{Wait: true, RebootRequested: true}, nil
}

// TearDownSteps has nothing of its own to tear down; the conductor powers
// the node off and cleans up the ramdisk boot.
func (*Direct) TearDownSteps(context.Context, *driver.Task, steps.Kind) error { return nil }

// Steps returns the direct interface's deploy steps (custom-agent's lack
// write_image).
func (d *Direct) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Deploy {
		return nil
	}
	mk := func(name string, prio int) steps.Step {
		return steps.MustDeclare(steps.Deploy, string(driver.KindDeploy), name, prio)
	}
	if d.custom {
		return []steps.Step{
			mk(StepDeploy, 100), mk(StepPrepareInstanceBoot, 60),
			mk(StepTearDownAgent, 40), mk(StepSwitchToTenantNetwork, 30), mk(StepBootInstance, 20),
		}
	}
	return []steps.Step{
		mk(StepDeploy, 100), mk(StepWriteImage, 80), mk(StepPrepareInstanceBoot, 60),
		mk(StepTearDownAgent, 40), mk(StepSwitchToTenantNetwork, 30), mk(StepBootInstance, 20),
	}
}

// ExecuteStep runs one of the direct interface's deploy steps.
// write_image proxies to the agent's in-band step of the same name and
// waits for it; the others finish at once (the conductor does their
// cross-interface part).
func (d *Direct) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if kind != steps.Deploy {
		return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.KindDeploy, Impl: Name, StepKind: string(kind), Step: s.Name}
	}
	switch s.Name {
	case StepDeploy:
		return d.Deploy(ctx, t)
	case StepWriteImage:
		if d.custom {
			break
		}
		return d.writeImage(ctx, t)
	case StepPrepareInstanceBoot:
		// The image is written: its URL expires now.
		d.releaseImage(t)
		if d.custom {
			return driver.StepResult{}, nil
		}
		return driver.StepResult{}, d.installBootloader(ctx, t)
	case StepSwitchToTenantNetwork, StepBootInstance:
		return driver.StepResult{}, nil
	case StepTearDownAgent:
		t.DeleteDriverInternalInfo(DeploymentRebootKey)
		return driver.StepResult{}, nil
	}
	return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.KindDeploy, Impl: Name, StepKind: string(kind), Step: s.Name}
}

// StepRerunSafe reports which of the direct interface's deploy steps may
// run again on a new conductor after the one running them died (the
// baremetal conductor's RerunSafeStepper): deploy (boot into the ramdisk),
// prepare_instance_boot, switch_to_tenant_network, boot_instance and
// tear_down_agent converge however often they run, since their work is a
// power action, a boot device or a network binding set to the same value.
// write_image is not: the agent may still be writing the image, and a
// second write would race the first.
func (*Direct) StepRerunSafe(kind steps.Kind, step string) bool {
	if kind != steps.Deploy {
		return false
	}
	switch step {
	case StepDeploy, StepPrepareInstanceBoot, StepSwitchToTenantNetwork, StepBootInstance, StepTearDownAgent:
		return true
	}
	return false
}

// StepHandsOffToAgent reports the direct interface's steps whose only
// work is to hand a command to the agent (the baremetal conductor's
// AgentHandoffStepper): write_image, which sends the agent
// deploy.execute_deploy_step. A new owner re-runs it after a takeover
// when the agent never received it.
func (*Direct) StepHandsOffToAgent(kind steps.Kind, step string) bool {
	return kind == steps.Deploy && step == StepWriteImage
}

// The image download sources of Ironic's [agent]image_download_source
// (overridden per node by instance_info or driver_info
// image_download_source): "http", the agent downloads image_url itself;
// "local", the conductor's image cache downloads it and serves it to the
// agent (Options.Images). Anvil has no Glance or Swift: "swift" is
// refused with a typed error rather than sending the agent a URL it
// cannot use.
const (
	ImageDownloadHTTP  = "http"
	ImageDownloadLocal = "local"
	ImageDownloadSwift = "swift"
)

// The image types of instance_info.image_type.
const (
	ImageTypeWholeDisk = "whole-disk"
	ImageTypePartition = "partition"
)

// imageHashAlgorithms are the os_hash_algo values IPA's hashlib accepts
// that Glance uses.
var imageHashAlgorithms = []string{"md5", "sha1", "sha224", "sha256", "sha384", "sha512"}

// ImageInfo builds the image_info argument of the agent's write_image
// step from instance_info the way Ironic's agent deploy does, so that
// IPA's standby._validate_image_info accepts it: id (the last path
// segment of image_source, which IPA uses to recognise an image it
// already wrote), urls (a one-element list: image_url, or image_source
// when it is an http(s) URL), checksum and/or os_hash_algo and
// os_hash_value, disk_format and container_format (null when unknown, so
// IPA detects the format instead of streaming a qcow2 as raw),
// stream_raw_images, node_uuid, the proxies of driver_info
// image_http_proxy, image_https_proxy and image_no_proxy, and image_type
// with, for a partition image, the partition fields (kernel, ramdisk,
// root_gb, root_mb, swap_mb, ephemeral_mb, ephemeral_format,
// preserve_ephemeral, image_mtu, deploy_boot_mode, boot_option,
// disk_label). Root device hints travel in the node's properties, where
// IPA's get_os_install_device reads them. Bad or missing input is a
// *driver.MissingParameterError or *driver.InvalidParameterError naming
// the node and the key.
func ImageInfo(t *driver.Task) (map[string]any, error) { return imageInfo(t, nil) }

// resolvedImage is an image the direct interface resolved: the URL the
// agent downloads, its checksum, and its format when known.
type resolvedImage struct {
	url, algo, value, diskFormat string
}

// imageInfo is ImageInfo, with the URL, checksum and format of r when
// the conductor resolved the image (an image cache URL, or an OCI blob).
func imageInfo(t *driver.Task, r *resolvedImage) (map[string]any, error) {
	invalid := func(field, key, expected string) error {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: field, Key: key, Expected: expected}
	}
	src, ok := t.InstanceString("image_source")
	if !ok || src == "" {
		return nil, &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Missing: []string{"image_source"}}
	}
	urlKey, url, err := imageURL(t)
	if err != nil {
		return nil, err
	}
	if r == nil {
		source, field := downloadSource(t, ImageDownloadHTTP)
		if source != ImageDownloadHTTP {
			return nil, invalid(field, "image_download_source", fmt.Sprintf("%q for an image_info built without the conductor (ImageInfo); %q needs the direct interface's image cache, and Anvil has no Swift (%q); got %v",
				ImageDownloadHTTP, ImageDownloadLocal, ImageDownloadSwift, source))
		}
		if oci.IsOCI(url) {
			return nil, invalid("instance_info", urlKey, "an http(s) URL: an oci:// image is resolved by the direct interface, not by ImageInfo")
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return nil, invalid("instance_info", urlKey, fmt.Sprintf("an http(s) URL the agent can download (image_download_source %q), got %q", ImageDownloadHTTP, url))
		}
	} else {
		url = r.url
	}
	id := src
	if i := strings.LastIndex(strings.TrimRight(src, "/"), "/"); i >= 0 {
		id = strings.TrimRight(src, "/")[i+1:]
	}
	info := map[string]any{
		"id":                id,
		"urls":              []any{url},
		"disk_format":       t.InstanceInfo["image_disk_format"],
		"container_format":  t.InstanceInfo["image_container_format"],
		"stream_raw_images": true,
		"node_uuid":         t.NodeUUID,
	}
	for _, k := range []string{"image_disk_format", "image_container_format"} {
		if v, ok := t.InstanceInfo[k]; ok && v != nil {
			if s, isStr := v.(string); !isStr || s == "" {
				return nil, invalid("instance_info", k, "a non-empty string such as \"raw\", \"qcow2\" or \"bare\"")
			}
		}
	}
	haveChecksum := false
	if r != nil {
		// The conductor verified the image, or the registry's digest is
		// its checksum: the agent gets that, not image_checksum.
		info["os_hash_algo"], info["os_hash_value"] = r.algo, r.value
		if r.diskFormat != "" && r.diskFormat != "unknown" {
			info["disk_format"] = r.diskFormat
		}
		haveChecksum = true
	} else if v, ok := t.InstanceInfo["image_checksum"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr || s == "" {
			return nil, invalid("instance_info", "image_checksum", "a non-empty string (a checksum or the URL of a checksum file)")
		}
		info["checksum"] = s
		haveChecksum = true
	}
	algo, hasAlgo := t.InstanceInfo["image_os_hash_algo"]
	value, hasValue := t.InstanceInfo["image_os_hash_value"]
	if r == nil && ((hasAlgo && algo != nil) || (hasValue && value != nil)) {
		a, aok := algo.(string)
		if !aok || !slices.Contains(imageHashAlgorithms, a) {
			return nil, invalid("instance_info", "image_os_hash_algo", fmt.Sprintf("one of %v with image_os_hash_value, got %v", imageHashAlgorithms, algo))
		}
		v, vok := value.(string)
		if !vok || v == "" {
			return nil, invalid("instance_info", "image_os_hash_value", "the non-empty hex digest for image_os_hash_algo "+a)
		}
		info["os_hash_algo"], info["os_hash_value"] = a, v
		haveChecksum = true
	}
	if !haveChecksum {
		return nil, &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info",
			Missing: []string{"image_checksum (or image_os_hash_algo and image_os_hash_value)"}}
	}
	proxies := map[string]any{}
	for _, scheme := range []string{"http", "https"} {
		if p, ok := t.DriverInfoString("image_" + scheme + "_proxy"); ok && p != "" {
			proxies[scheme] = p
		}
	}
	if len(proxies) > 0 {
		info["proxies"] = proxies
		if np, ok := t.DriverInfo["image_no_proxy"]; ok && np != nil {
			info["no_proxy"] = np
		}
	}
	typ, err := imageType(t)
	if err != nil {
		return nil, err
	}
	info["image_type"] = typ
	if typ == ImageTypePartition {
		if err := partitionFields(t, info); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// imageType is instance_info.image_type when set, else Ironic's
// is_whole_disk_image record, else "partition" exactly when both a kernel
// and a ramdisk are given (Ironic's rule for images not in Glance).
func imageType(t *driver.Task) (string, error) {
	if v, ok := t.InstanceInfo["image_type"]; ok && v != nil {
		s, _ := v.(string)
		if s != ImageTypeWholeDisk && s != ImageTypePartition {
			return "", &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Key: "image_type",
				Expected: fmt.Sprintf("%q or %q, got %v", ImageTypeWholeDisk, ImageTypePartition, v)}
		}
		return s, nil
	}
	if wd, ok := t.DriverInternalInfo["is_whole_disk_image"].(bool); ok {
		if wd {
			return ImageTypeWholeDisk, nil
		}
		return ImageTypePartition, nil
	}
	k, _ := t.InstanceString("kernel")
	r, _ := t.InstanceString("ramdisk")
	if k != "" && r != "" {
		return ImageTypePartition, nil
	}
	return ImageTypeWholeDisk, nil
}

// partitionFields adds the fields IPA's partition image writer reads;
// root_gb is required (IPA sizes the root partition from root_mb).
func partitionFields(t *driver.Task, info map[string]any) error {
	invalid := func(key, expected string) error {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Key: key, Expected: expected}
	}
	raw, ok := t.InstanceInfo["root_gb"]
	if !ok || raw == nil {
		return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Missing: []string{"root_gb"}}
	}
	rootGB, ok := wholeNumber(raw)
	if !ok || rootGB <= 0 {
		return invalid("root_gb", fmt.Sprintf("a positive whole number of GiB for the partition image's root partition, got %v", raw))
	}
	info["root_gb"] = rootGB
	info["root_mb"] = rootGB * 1024
	for _, k := range []string{"swap_mb", "ephemeral_mb"} {
		if v, ok := t.InstanceInfo[k]; ok && v != nil {
			n, ok := wholeNumber(v)
			if !ok || n < 0 {
				return invalid(k, fmt.Sprintf("a whole number of MiB, got %v", v))
			}
			info[k] = n
		} else {
			info[k] = int64(0)
		}
	}
	for _, k := range []string{"kernel", "ramdisk", "ephemeral_format", "preserve_ephemeral", "image_mtu"} {
		info[k] = t.InstanceInfo[k]
	}
	mode := "uefi"
	if m, ok := t.InstanceString("deploy_boot_mode"); ok && m != "" {
		mode = m
	} else if m := capability(t.InstanceInfo["capabilities"], "boot_mode"); m != "" {
		mode = m
	} else if m := capability(t.Properties["capabilities"], "boot_mode"); m != "" {
		mode = m
	}
	if mode != "uefi" && mode != "bios" {
		return invalid("deploy_boot_mode", fmt.Sprintf("\"uefi\" or \"bios\", got %q", mode))
	}
	info["deploy_boot_mode"] = mode
	info["boot_option"] = "local"
	if l := capability(t.InstanceInfo["capabilities"], "disk_label"); l != "" {
		info["disk_label"] = l
	} else if l := capability(t.Properties["capabilities"], "disk_label"); l != "" {
		info["disk_label"] = l
	}
	return nil
}

// capability reads one key of Ironic's capabilities: an object, or the
// "k1:v1,k2:v2" string form.
func capability(raw any, key string) string {
	switch c := raw.(type) {
	case map[string]any:
		s, _ := c[key].(string)
		return s
	case string:
		for _, kv := range strings.Split(c, ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok && strings.TrimSpace(k) == key {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

// wholeNumber reads an integer that came through JSON (float64,
// json.Number), Go code (int kinds) or a string.
func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func (d *Direct) writeImage(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if d.client == nil {
		return driver.StepResult{}, fmt.Errorf("deploy/direct: node %s: no agent client", t.NodeUUID)
	}
	url, _ := t.InternalString(driver.InternalAgentURL)
	tok, _ := t.InternalString(driver.InternalAgentToken)
	ca, _ := t.InternalString(driver.InternalAgentVerifyCA)
	if url == "" {
		return driver.StepResult{}, fmt.Errorf("deploy/direct: node %s: %w: no agent URL recorded", t.NodeUUID, agentclient.ErrConnectionFailed)
	}
	r, err := d.resolveImage(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	info, err := imageInfo(t, r)
	if err != nil {
		return driver.StepResult{}, err
	}
	args := map[string]any{"image_info": info}
	if cd, ok := t.InstanceInfo["configdrive"]; ok {
		args["configdrive"] = cd
	}
	step := steps.Step{Interface: string(driver.KindDeploy), Name: StepWriteImage, Args: args, Priority: 80}
	// IPA caches this node and reads the root device hints from its
	// properties (get_os_install_device).
	node := map[string]any{"uuid": t.NodeUUID, "properties": t.Properties,
		"instance_info": map[string]any{"configdrive": t.InstanceInfo["configdrive"]}}
	version := map[string]string{}
	if raw, ok := t.DriverInternalInfo[steps.HardwareManagerVersionKey].(map[string]any); ok {
		for k, v := range raw {
			version[k] = fmt.Sprint(v)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := d.client.ExecuteDeployStep(cctx, agentclient.Agent{NodeUUID: t.NodeUUID, URL: url, Token: tok, VerifyCA: ca}, step, node, nil, version)
	if err != nil {
		return driver.StepResult{}, fmt.Errorf("deploy/direct: write_image on node %s: %w", t.NodeUUID, err)
	}
	out := driver.StepResult{Wait: true}
	if res != nil {
		out.AgentCommand = res.ID
	}
	return out, nil
}

// installBootloader is the agent's part of prepare_instance_boot, as
// Ironic's AgentDeployMixin.configure_local_boot decides it: a partition
// image gets its boot loader installed (image.install_bootloader with
// the root and EFI system partition UUIDs the agent recorded while
// writing it), and a whole-disk image in UEFI mode gets the firmware's
// boot entries for the loaders on its EFI system partition (the same
// command with no root UUID: IPA runs efibootmgr). A whole-disk image in
// BIOS mode boots its own boot code: nothing to do, unless the node's
// target_raid_config asks for software RAID (driver.IsSoftwareRAID): the
// image then sits on an md device the firmware cannot read, and the
// agent installs the boot loader on the RAID's holder disks (BIOS: GRUB
// on each, from the image's root file system; UEFI: an EFI System
// Partition on each, mirrored). For software RAID the root UUID is the
// image's file system UUID from instance_info image_rootfs_uuid, else
// what the agent recorded while writing the image (for a whole-disk
// image its disk identifier, which IPA cannot find, so it takes the md
// device's first partition), as Ironic without Glance; in UEFI mode the
// call is not retried without target_boot_mode, as in Ironic. The boot
// mode is the node's (pxe.BootMode, Options.DefaultBootMode), sent as
// target_boot_mode.
func (d *Direct) installBootloader(ctx context.Context, t *driver.Task) error {
	typ, err := imageType(t)
	if err != nil {
		return err
	}
	mode, _, err := pxe.BootMode(t, Name, d.o.DefaultBootMode)
	if err != nil {
		return err
	}
	softwareRAID := driver.IsSoftwareRAID(t.TargetRAIDConfig)
	if typ == ImageTypeWholeDisk && mode != netboot.UEFI && !softwareRAID {
		return nil
	}
	if d.client == nil {
		return fmt.Errorf("deploy/direct: node %s: no agent client", t.NodeUUID)
	}
	url, _ := t.InternalString(driver.InternalAgentURL)
	tok, _ := t.InternalString(driver.InternalAgentToken)
	ca, _ := t.InternalString(driver.InternalAgentVerifyCA)
	if url == "" {
		return fmt.Errorf("deploy/direct: node %s: %w: no agent URL recorded for install_bootloader", t.NodeUUID, agentclient.ErrConnectionFailed)
	}
	a := agentclient.Agent{NodeUUID: t.NodeUUID, URL: url, Token: tok, VerifyCA: ca}
	cctx, cancel := context.WithTimeout(ctx, d.o.BootloaderTimeout)
	defer cancel()
	args := agentclient.InstallBootloaderArgs{TargetBootMode: string(mode), SoftwareRAID: softwareRAID}
	rootfs, _ := t.InstanceInfo["image_rootfs_uuid"].(string)
	if typ == ImageTypePartition || (softwareRAID && rootfs == "") {
		uuids, err := d.client.GetPartitionUUIDs(cctx, a)
		if err != nil {
			return fmt.Errorf("deploy/direct: node %s: the partition UUIDs of the written image: %w", t.NodeUUID, err)
		}
		if uuids.Root == "" && typ == ImageTypePartition {
			return fmt.Errorf("deploy/direct: node %s: the agent recorded no root partition UUID for the partition image", t.NodeUUID)
		}
		args.RootUUID, args.PRePBootPartUUID = uuids.Root, uuids.PReP
		if mode == netboot.UEFI && typ == ImageTypePartition {
			args.EFISystemPartUUID = uuids.EFISystemPartition
		}
		if uuids.Root != "" {
			t.SetDriverInternalInfo("root_uuid_or_disk_id", uuids.Root)
		}
	}
	if softwareRAID && rootfs != "" {
		args.RootUUID = rootfs
	}
	if _, err := d.client.InstallBootloader(cctx, a, args); err != nil {
		return fmt.Errorf("deploy/direct: node %s: install_bootloader (%s, %s image): %w", t.NodeUUID, mode, typ, err)
	}
	return nil
}

var (
	_ driver.DeployInterface = (*Direct)(nil)
	_ driver.StepPreparer    = (*Direct)(nil)
	_ driver.StepProvider    = (*Direct)(nil)
	_ driver.StepRunner      = (*Direct)(nil)
)
