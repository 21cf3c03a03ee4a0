package netboot

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// errNotServed is what resolve returns for a path the server has nothing
// at; the TFTP and HTTP sides turn it into their not-found answers.
var errNotServed = errors.New("netboot: nothing served at this path")

// served is what a request path resolves to: generated content or a
// local file, and how a complete transfer of it is recorded.
type served struct {
	data  []byte // generated content, or nil
	path  string // a local file, when data is nil
	stage stage.Stage
	node  string
	mac   string
	// kind is the content's type: "script", "config" or "" (binary).
	kind string
}

// resolve maps a parsed route, asked for by a machine at remote, to what
// it serves. TFTP and HTTP share it: a file is served the same way on
// both, from the same decision (planFor); scripts name URLs of the
// machine's address family (HTTPBase or HTTPBase6).
func (s *Server) resolve(ctx context.Context, rt route, remote netip.Addr) (served, error) {
	base := s.baseFor(remote)
	switch rt.kind {
	case routeBinary:
		p, err := s.binaryPath(rt.file, true)
		if err != nil {
			s.log.WarnContext(ctx, "netboot: a machine asked for a missing boot loader", "err", err)
			return served{}, errNotServed
		}
		out := served{path: p, stage: stage.File}
		if rt.mac != "" {
			// boot/<mac>/<loader>, as DHCPv6 boot file URLs name it.
			out.mac, out.node = rt.mac, s.planFor(ctx, rt.mac).node
		}
		return out, nil
	case routeGenericScript:
		return served{data: genericScriptAt(base), stage: stage.File, kind: "script"}, nil
	case routeGRUBMaster:
		return served{data: grubMaster(), stage: stage.File, kind: "config"}, nil
	}
	p := s.planFor(ctx, rt.mac)
	out := served{node: p.node, mac: rt.mac}
	switch rt.kind {
	case routeScript:
		out.data, out.kind = s.scriptAt(base, rt.mac, p), "script"
		switch {
		case p.kind == planNone:
			return served{}, errNotServed
		case p.kind == planFallback:
			out.stage = stage.Fallback
		case p.kind == planLocal || p.cfg.Action == LocalDisk:
			out.stage = stage.LocalBoot
		default:
			out.stage = stage.Script
		}
		return out, nil
	case routePXELinuxCfg, routeGRUBConfig:
		if p.kind != planConfig || p.family() != familyLoader {
			return served{}, errNotServed
		}
		out.kind = "config"
		if rt.kind == routePXELinuxCfg {
			out.data = pxelinuxConfig(p.cfg, rt.mac)
		} else {
			out.data = grubConfig(p.cfg, rt.mac)
		}
		out.stage = stage.Script
		if p.cfg.Action == LocalDisk {
			out.stage = stage.LocalBoot
		}
		return out, nil
	case routeKernel, routeRamdisk:
		var kernel, ramdisk string
		switch {
		case p.kind == planConfig && p.cfg.Action == Ramdisk:
			kernel, ramdisk = p.cfg.Kernel, p.cfg.Ramdisk
		case p.kind == planFallback:
			kernel, ramdisk = s.opts.Fallback.Kernel, s.opts.Fallback.Ramdisk
		default:
			return served{}, errNotServed
		}
		out.path, out.stage = kernel, stage.Kernel
		if rt.kind == routeRamdisk {
			out.path, out.stage = ramdisk, stage.Ramdisk
		}
		if !strings.HasPrefix(out.path, "/") {
			// A URL: the script sends the machine there, not here.
			return served{}, errNotServed
		}
		return out, nil
	}
	return served{}, errNotServed
}

// baseFor is the HTTP base a machine at remote reaches: HTTPBase6 for an
// IPv6 one, HTTPBase otherwise.
func (s *Server) baseFor(remote netip.Addr) string {
	if remote.IsValid() && remote.Unmap().Is6() {
		return s.base6
	}
	return s.base
}

// who fills in the MAC and node of a record from the address book when
// the path did not name a MAC.
func (s *Server) who(r *stage.Record, remote netip.Addr) {
	if r.MAC != "" || !remote.IsValid() {
		return
	}
	if e, ok := s.addrs.get(remote); ok {
		r.MAC = e.mac
		if r.Node == "" {
			r.Node = e.node
		}
	}
}

// openLocal opens a local file for serving: a regular file only.
func openLocal(p string) (*os.File, os.FileInfo, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("netboot: %s is not a regular file", p)
	}
	return f, fi, nil
}
