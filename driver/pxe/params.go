package pxe

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/statemachine"
)

// configMeta are the characters an iPXE script, a GRUB configuration or a
// pxelinux configuration would interpret on a kernel line (quoting,
// variable expansion, command separators, comments, blocks), so a
// parameter holding one could change the boot configuration instead of
// reaching the kernel.
const configMeta = "\"'$;`\\{}|&<>#"

// MaxCommandLine bounds the kernel command line the parameters make
// (x86's COMMAND_LINE_SIZE is 2048 bytes; 256 are left for the initrd=
// and BOOTIF= parameters the boot server adds).
const MaxCommandLine = 2048 - 256

// checkWord reports why w cannot go on a kernel line, or "".
func checkWord(w string) string {
	for _, r := range w {
		if r < 0x21 || r > 0x7e {
			return fmt.Sprintf("parameter %q holds a control, space or non-ASCII character", w)
		}
	}
	if i := strings.IndexAny(w, configMeta); i >= 0 {
		return fmt.Sprintf("parameter %q holds %q, which the boot loader would interpret (none of %s)", w, w[i], configMeta)
	}
	return ""
}

// secretParam reports whether a kernel parameter's name is a secret's: a
// token (IPA's ipa-agent-token) or a password must never be on a kernel
// command line, which anyone who can fetch the boot configuration or read
// /proc/cmdline sees. The agent gets its token at lookup.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"token", "password", "passwd", "secret"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// splitParams splits a kernel_append_params value into words and checks
// each. Newlines and other control characters are refused (not taken as
// separators): in a boot loader configuration they start a new command.
func splitParams(s string) ([]string, error) {
	if i := strings.IndexFunc(s, func(r rune) bool { return r != ' ' && r != '\t' && (r < 0x20 || r == 0x7f) }); i >= 0 {
		return nil, fmt.Errorf("a control character (%q) would start a new boot loader command", s[i])
	}
	words := strings.Fields(s)
	for _, w := range words {
		if why := checkWord(w); why != "" {
			return nil, fmt.Errorf("%s", why)
		}
		name, _, _ := strings.Cut(w, "=")
		if name == "" {
			return nil, fmt.Errorf("parameter %q has no name", w)
		}
		if secretParam(name) {
			return nil, fmt.Errorf("parameter %q names a secret, which is never put on a kernel command line", name)
		}
	}
	return words, nil
}

// appendParams returns the node's kernel_append_params words:
// instance_info's, else driver_info's, else the conductor's default, with
// "%default%" replaced by the default, as Ironic's
// get_kernel_append_params does (for the agent ramdisk and for a ramdisk
// deploy's instance alike).
func (b *Boot) appendParams(t *driver.Task) ([]string, error) {
	const key = "kernel_append_params"
	def := b.x.opts.KernelAppendParams
	value, field := def, ""
	if s, ok := t.InstanceString(key); ok {
		value, field = s, "instance_info"
	} else if s, ok := t.DriverInfoString(key); ok {
		value, field = s, "driver_info"
	}
	value = strings.ReplaceAll(value, "%default%", def)
	words, err := splitParams(value)
	if err != nil {
		if field == "" {
			field = "options"
		}
		return nil, b.invalid(t, field, key, "kernel parameters that cannot change the boot configuration: "+err.Error())
	}
	return words, nil
}

// conductorParams renders the conductor's ramdisk parameters as
// key=value words sorted by key (a nil, empty or true value gives the
// bare key), refusing secrets and what a boot loader would interpret.
func (b *Boot) conductorParams(t *driver.Task, params map[string]any) ([]string, error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if secretParam(k) {
			return nil, b.invalid(t, "ramdisk parameters", k, "no secret: an agent token or password is never put on a kernel command line (the agent gets its token at lookup)")
		}
		var w string
		switch v := params[k].(type) {
		case nil:
			w = k
		case bool:
			if v {
				w = k
			} else {
				w = k + "=0"
			}
		case string:
			w = k
			if v != "" {
				w = k + "=" + v
			}
		case float64:
			w = k + "=" + strconv.FormatFloat(v, 'f', -1, 64)
		case int:
			w = k + "=" + strconv.Itoa(v)
		case int64:
			w = k + "=" + strconv.FormatInt(v, 10)
		default:
			return nil, b.invalid(t, "ramdisk parameters", k, "a string, number or boolean value")
		}
		if why := checkWord(w); why != "" {
			return nil, b.invalid(t, "ramdisk parameters", k, "a value that cannot change the boot configuration: "+why)
		}
		out = append(out, w)
	}
	return out, nil
}

// imageRefExpected says what deploy_kernel and friends must be.
const imageRefExpected = "an http(s) URL or an absolute local path, without spaces, quotes or boot loader metacharacters"

// validImageRef reports whether s is an http(s) URL with a host, or an
// absolute clean path, that is safe to write into a boot configuration.
func validImageRef(s string) bool {
	if checkWord(s) != "" {
		return false
	}
	if strings.HasPrefix(s, "/") {
		return path.Clean(s) == s
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// checkImage records on r why v cannot be b's image under key: not an
// image reference, or a URL where b's boot loader (pxelinux, GRUB) loads
// kernel and ramdisk from the boot server only, which serves local files
// (the boot server would refuse the configuration).
func (b *Boot) checkImage(r *driver.InfoReader, key, v string) {
	switch {
	case v == "":
	case !validImageRef(v):
		r.Invalid(key, imageRefExpected)
	case !strings.HasPrefix(v, "/") && !b.fetchesURLs():
		r.Invalid(key, localImageExpected)
	}
}

// localImageExpected is what the pxe and http interfaces take for an
// image.
const localImageExpected = "an absolute local path the boot server serves (the pxe and http boot interfaces load kernel and ramdisk from it; use ipxe or http-ipxe for http(s) URLs)"

// fetchesURLs reports whether b's boot loader (iPXE) fetches http(s)
// images itself.
func (b *Boot) fetchesURLs() bool { return b.iface == netboot.IPXE || b.iface == netboot.HTTPIPXE }

// rescuing reports whether the node boots its ramdisk for rescue.
func rescuing(s statemachine.State) bool {
	return s == statemachine.Rescuing || s == statemachine.RescueWait
}

// images returns the kernel and ramdisk of the node's ramdisk boot: the
// rescue ones when rescue is set, else the deploy ones; driver_info
// first, then the conductor's defaults.
func (b *Boot) images(t *driver.Task, rescue bool) (kernel, ramdisk string, err error) {
	o := b.x.opts
	kk, rk, kdef, rdef := "deploy_kernel", "deploy_ramdisk", o.DeployKernel, o.DeployRamdisk
	if rescue {
		kk, rk, kdef, rdef = "rescue_kernel", "rescue_ramdisk", o.RescueKernel, o.RescueRamdisk
	}
	r := driver.ReadDriverInfo(t, driver.KindBoot, b.name)
	pick := func(key, def string) string {
		v := r.String(key, def == "")
		if v == "" {
			v = def
		}
		b.checkImage(r, key, v)
		return v
	}
	kernel, ramdisk = pick(kk, kdef), pick(rk, rdef)
	if err := r.Err(); err != nil {
		return "", "", err
	}
	return kernel, ramdisk, nil
}

// NoPortError says a node has no pxe-enabled port, so no boot
// configuration can be keyed for it. It matches driver.ErrMissingParameter.
type NoPortError struct {
	Node string
	Impl string
}

func (e *NoPortError) Error() string {
	return fmt.Sprintf("boot/%s: Node %s does not have any port associated with it; a network boot needs at least one pxe_enabled port with a MAC address", e.Impl, e.Node)
}

// Is matches driver.ErrMissingParameter.
func (e *NoPortError) Is(target error) bool { return target == driver.ErrMissingParameter }

// macs returns the lower-case MAC addresses of the node's pxe-enabled
// ports, each once, in port order.
func (b *Boot) macs(t *driver.Task) ([]string, error) {
	var out []string
	for _, p := range t.Ports {
		if !p.PXEEnabled {
			continue
		}
		m, ok := netboot.ParseMAC(p.Address)
		if !ok {
			key := p.UUID
			if key == "" {
				key = p.Address
			}
			return nil, b.invalid(t, "ports", key, "a MAC address such as 52:54:00:12:34:56")
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, &NoPortError{Node: t.NodeUUID, Impl: b.name}
	}
	return out, nil
}

// persistence reads driver_info force_persistent_boot_device: "Always",
// "Default" or "Never" (the old "True" and "False" still accepted, as
// Ironic does).
func (b *Boot) persistence(t *driver.Task) (string, error) {
	s, ok := t.DriverInfoString("force_persistent_boot_device")
	if !ok {
		return "Default", nil
	}
	switch strings.ToLower(s) {
	case "always", "true":
		return "Always", nil
	case "default", "false":
		return "Default", nil
	case "never":
		return "Never", nil
	}
	return "", b.invalid(t, "driver_info", "force_persistent_boot_device", `"Always", "Default" or "Never"`)
}

func (b *Boot) invalid(t *driver.Task, field, key, expected string) error {
	return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindBoot, Impl: b.name, Field: field, Key: key, Expected: expected}
}
