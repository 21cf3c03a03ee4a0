package imagecache

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Disk formats the cache recognises.
const (
	FormatRaw   = "raw"
	FormatQCOW2 = "qcow2"
	FormatISO   = "iso"
	FormatVMDK  = "vmdk"
	FormatVHDX  = "vhdx"
	FormatVDI   = "vdi"
)

// DefaultPermittedFormats is [conductor]permitted_image_formats.
var DefaultPermittedFormats = []string{FormatRaw, FormatQCOW2, FormatISO}

// imageInfo is what inspection found in a downloaded image.
type imageInfo struct {
	format      string
	virtualSize int64 // qcow2's; a raw image's is its size
}

// ErrUnsafeImage is wrapped when an image's header asks for something
// the conductor must not do (a qcow2 backing file or external data file,
// which qemu-img would open on the conductor's file system).
var ErrUnsafeImage = errors.New("unsafe image")

// inspect reads the header of the image at path, as Ironic's format
// inspector does, enough to tell the format and refuse what is unsafe.
func inspect(path string) (imageInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return imageInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return imageInfo{}, err
	}
	hdr := make([]byte, 0x8006)
	n, err := io.ReadFull(f, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return imageInfo{}, err
	}
	hdr = hdr[:n]
	switch {
	case len(hdr) >= 104 && bytes.Equal(hdr[:4], []byte("QFI\xfb")):
		version := binary.BigEndian.Uint32(hdr[4:8])
		backing := binary.BigEndian.Uint64(hdr[8:16])
		size := binary.BigEndian.Uint64(hdr[24:32])
		if backing != 0 {
			return imageInfo{}, fmt.Errorf("%w: the qcow2 image names a backing file", ErrUnsafeImage)
		}
		if version >= 3 {
			incompat := binary.BigEndian.Uint64(hdr[72:80])
			if incompat&(1<<2) != 0 {
				return imageInfo{}, fmt.Errorf("%w: the qcow2 image has an external data file", ErrUnsafeImage)
			}
		}
		if size > 1<<50 {
			return imageInfo{}, fmt.Errorf("%w: the qcow2 image claims a virtual size of %d bytes", ErrUnsafeImage, size)
		}
		return imageInfo{format: FormatQCOW2, virtualSize: int64(size)}, nil
	case len(hdr) >= 4 && bytes.Equal(hdr[:4], []byte("KDMV")):
		return imageInfo{format: FormatVMDK}, nil
	case len(hdr) >= 8 && bytes.Equal(hdr[:8], []byte("vhdxfile")):
		return imageInfo{format: FormatVHDX}, nil
	case len(hdr) >= 0x44 && binary.LittleEndian.Uint32(hdr[0x40:0x44]) == 0xbeda107f:
		return imageInfo{format: FormatVDI}, nil
	case len(hdr) >= 0x8006 && bytes.Equal(hdr[0x8001:0x8006], []byte("CD001")):
		return imageInfo{format: FormatISO, virtualSize: st.Size()}, nil
	}
	return imageInfo{format: FormatRaw, virtualSize: st.Size()}, nil
}

// converter runs qemu-img convert under the address-space and CPU-time
// limits Ironic's qemu_img module sets (through prlimit), with
// MALLOC_ARENA_MAX=3, retrying when the limit made an allocation fail.
type converter struct {
	qemuImg  string
	prlimit  string
	memory   int64 // bytes of address space
	cpu      time.Duration
	attempts int
}

// convert writes src (of format from) as a raw image to dst.
func (c converter) convert(ctx context.Context, src, dst, from string) error {
	args := []string{"--as=" + strconv.FormatInt(c.memory, 10)}
	if c.cpu > 0 {
		args = append(args, "--cpu="+strconv.FormatInt(int64(c.cpu/time.Second), 10))
	}
	args = append(args, "--", c.qemuImg, "convert", "-f", from, "-O", FormatRaw, src, dst)
	var last error
	for i := 0; i < max(c.attempts, 1); i++ {
		cmd := exec.CommandContext(ctx, c.prlimit, args...)
		cmd.Env = []string{"MALLOC_ARENA_MAX=3", "LC_ALL=C", "PATH=" + os.Getenv("PATH")}
		var stderr bytes.Buffer
		cmd.Stderr = &limitedWriter{w: &stderr, n: 16 << 10}
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		if err == nil {
			return nil
		}
		msg := strings.TrimSpace(stderr.String())
		last = fmt.Errorf("qemu-img convert: %w: %s", err, msg)
		if ctx.Err() != nil || !(strings.Contains(msg, "Resource temporarily unavailable") || strings.Contains(msg, "Cannot allocate memory")) {
			break
		}
		os.Remove(dst)
	}
	return last
}

type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if int64(len(q)) > l.n {
		q = q[:l.n]
	}
	l.n -= int64(len(q))
	_, _ = l.w.Write(q)
	return len(p), nil
}
