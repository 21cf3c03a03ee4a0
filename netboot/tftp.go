package netboot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
)

// OpenTFTP opens the file a TFTP read request names (the layout is
// parsePath's); the Server is the TFTP server's tftp.Handler. A name the
// server serves nothing at wraps tftp.ErrNotFound; a local file that
// cannot be opened too (its error is logged, not sent).
func (s *Server) OpenTFTP(ctx context.Context, r *tftp.Request) (tftp.File, error) {
	rt := parsePath(r.Filename)
	if rt.kind == routeNone {
		return nil, fmt.Errorf("netboot: %q: %w", truncate(r.Filename, 64), tftp.ErrNotFound)
	}
	sv, err := s.resolve(ctx, rt, r.Remote.Addr())
	if err != nil {
		return nil, fmt.Errorf("netboot: %q: %w", r.Filename, tftp.ErrNotFound)
	}
	if sv.data != nil {
		return memFile{bytes.NewReader(sv.data)}, nil
	}
	f, fi, err := openLocal(sv.path)
	if err != nil {
		s.log.WarnContext(ctx, "netboot: cannot open a file to serve", "file", r.Filename, "node", sv.node, "err", err)
		return nil, fmt.Errorf("netboot: %q: %w", r.Filename, tftp.ErrNotFound)
	}
	return osFile{File: f, size: fi.Size()}, nil
}

// OnTransfer records a finished TFTP transfer; pass it as the TFTP
// server's OnTransfer. A complete transfer of a MAC's kernel or ramdisk
// records stage.Kernel or stage.Ramdisk, of its pxelinux or GRUB
// configuration stage.Script (stage.LocalBoot for a local-disk one), of
// anything else stage.TFTPSent; a failed one stage.TFTPFailed. A failed
// request for a name the server serves nothing at is not recorded:
// pxelinux and GRUB probe several names (pxelinux.cfg/<uuid>, by IP
// address, grub/x86_64-efi/grub.cfg) before the one that exists.
func (s *Server) OnTransfer(t tftp.Transfer) {
	rt := parsePath(t.Request.Filename)
	if t.Err != nil && (rt.kind == routeNone || errors.Is(t.Err, tftp.ErrNotFound)) {
		s.log.Debug("netboot: TFTP request for a file not served", "file", t.Request.Filename, "remote", t.Request.Remote)
		return
	}
	rec := stage.Record{
		MAC:      rt.mac,
		File:     t.Request.Filename,
		Bytes:    t.Bytes,
		Duration: t.Duration,
		Stage:    stage.TFTPSent,
	}
	if a := t.Request.Remote.Addr(); a.IsValid() {
		rec.Addr = a.Unmap().String()
	}
	if rt.mac != "" {
		if c, ok := s.lookup(rt.mac); ok {
			rec.Node = c.Node
		}
	}
	s.who(&rec, t.Request.Remote.Addr())
	switch {
	case t.Err != nil:
		rec.Stage, rec.Err = stage.TFTPFailed, t.Err.Error()
	case rt.kind == routeKernel:
		rec.Stage = stage.Kernel
	case rt.kind == routeRamdisk:
		rec.Stage = stage.Ramdisk
	case rt.kind == routePXELinuxCfg || rt.kind == routeGRUBConfig:
		rec.Stage = stage.Script
		if c, ok := s.lookup(rt.mac); ok && c.Action == LocalDisk {
			rec.Stage = stage.LocalBoot
		}
	}
	s.observe(rec)
}

// memFile is generated content as a tftp.File.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// osFile is a local file as a tftp.File.
type osFile struct {
	*os.File
	size int64
}

func (f osFile) Size() int64 { return f.size }

var _ tftp.Handler = (*Server)(nil)
