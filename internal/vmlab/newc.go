package vmlab

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// cpioEntry is one member of a newc ("SVR4 with no CRC") cpio archive, the
// format the Linux kernel unpacks as an initramfs.
type cpioEntry struct {
	Name string      // without a leading slash: "bin/busybox"
	Mode fs.FileMode // type bits and permissions
	// Data is a regular file's content or a symlink's target.
	Data []byte
	// RdevMajor and RdevMinor are a device node's numbers.
	RdevMajor, RdevMinor uint32
}

// Mode bits of the cpio format (stat's S_IF* values).
const (
	cpioDir     = 0o040000
	cpioRegular = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

// writeNewc writes entries as a newc archive with its trailer. Every
// varying field is fixed (owner root, mtime 0, inodes numbered in order),
// so the same entries always give the same bytes.
func writeNewc(w io.Writer, entries []cpioEntry) error {
	for i, e := range entries {
		if e.Name == "" || strings.HasPrefix(e.Name, "/") {
			return fmt.Errorf("vmlab: cpio entry %q: names are relative and not empty", e.Name)
		}
		var kind uint32
		switch {
		case e.Mode.IsDir():
			kind = cpioDir
		case e.Mode&fs.ModeSymlink != 0:
			kind = cpioSymlink
		case e.Mode&fs.ModeCharDevice != 0:
			kind = cpioChar
		case e.Mode.IsRegular():
			kind = cpioRegular
		default:
			return fmt.Errorf("vmlab: cpio entry %q: unsupported mode %v", e.Name, e.Mode)
		}
		if (kind == cpioDir || kind == cpioChar) && len(e.Data) > 0 {
			return fmt.Errorf("vmlab: cpio entry %q: a %v has no data", e.Name, e.Mode.Type())
		}
		nlink := uint32(1)
		if kind == cpioDir {
			nlink = 2
		}
		if err := writeNewcMember(w, uint32(i+1), kind|uint32(e.Mode.Perm()), nlink, e.RdevMajor, e.RdevMinor, e.Name, e.Data); err != nil {
			return err
		}
	}
	return writeNewcMember(w, 0, 0, 1, 0, 0, "TRAILER!!!", nil)
}

func writeNewcMember(w io.Writer, ino, mode, nlink, rdevMajor, rdevMinor uint32, name string, data []byte) error {
	// 13 eight-digit hex fields after the magic: ino, mode, uid, gid,
	// nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor,
	// namesize (with its NUL), check (0: no CRC).
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+4+len(data)+3)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	buf = append(buf, data...)
	buf = pad4(buf)
	_, err := w.Write(buf)
	return err
}

// pad4 pads b with NULs to a multiple of 4 bytes; each member starts at
// such an offset, so b's length is the offset within the member.
func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
