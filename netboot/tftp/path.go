package tftp

import (
	"fmt"
	"path"
	"strings"
)

// cleanFilename turns the filename of a request into the name a Handler
// sees, or an error wrapping ErrAccess. The rules, in order:
//
//   - a NUL or any other control character is refused;
//   - a backslash is a path separator: PXE clients of Windows deployment
//     servers ask for "boot\x64\wdsnbp.com", and no boot file has a
//     backslash in its name;
//   - leading slashes are dropped: "/pxelinux.0" names the file at the
//     root, as tftp-hpa's -s and dnsmasq's tftp-root treat it;
//   - any ".." element is refused outright, even one that would stay
//     inside the root ("a/../b"): no boot loader asks for one, and a
//     rule with no exceptions is easy to audit;
//   - "." elements and repeated slashes are removed (path.Clean);
//   - a name that is empty after this (the root itself) is refused.
func cleanFilename(name string) (string, error) {
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] == 0x7f {
			return "", fmt.Errorf("%w: filename %q has a control character", ErrAccess, name)
		}
	}
	s := strings.ReplaceAll(name, `\`, "/")
	s = strings.TrimLeft(s, "/")
	for _, el := range strings.Split(s, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: filename %q climbs with \"..\"", ErrAccess, name)
		}
	}
	s = path.Clean("/" + s)[1:]
	if s == "" {
		return "", fmt.Errorf("%w: filename %q names the root directory", ErrAccess, name)
	}
	return s, nil
}
