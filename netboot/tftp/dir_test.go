package tftp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// tree makes a root with a file, a subdirectory, links that stay inside
// and links that lead out, and a secret beside the root.
func tree(t *testing.T) (root string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "pxelinux.cfg"), 0o755))
	must(os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o644))
	must(os.WriteFile(filepath.Join(root, "pxelinux.0"), pattern(3000, 1), 0o644))
	must(os.WriteFile(filepath.Join(root, "pxelinux.cfg", "default"), []byte("DEFAULT local\n"), 0o644))
	must(os.Symlink("../pxelinux.0", filepath.Join(root, "pxelinux.cfg", "inside")))
	must(os.Symlink("../../secret", filepath.Join(root, "pxelinux.cfg", "outside")))
	must(os.Symlink(filepath.Join(base, "secret"), filepath.Join(root, "absolute")))
	must(os.Symlink("..", filepath.Join(root, "up")))
	must(os.Symlink("missing", filepath.Join(root, "dangling")))
	return root
}

func TestDirHandler(t *testing.T) {
	root := tree(t)
	h := DirHandler(root)
	cases := []struct {
		name string
		want error // nil: served
	}{
		{"pxelinux.0", nil},
		{"pxelinux.cfg/default", nil},
		{"pxelinux.cfg/inside", nil},
		{"pxelinux.cfg/outside", ErrAccess},
		{"absolute", ErrAccess},
		{"up/secret", ErrAccess},
		{"pxelinux.cfg", ErrAccess},
		{"missing", ErrNotFound},
		{"dangling", ErrNotFound},
		{"pxelinux.0/x", ErrAccess},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := h.OpenTFTP(context.Background(), &Request{Filename: c.name})
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("OpenTFTP(%q): %v, want %v", c.name, err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want, _ := os.ReadFile(filepath.Join(root, c.name))
			got := make([]byte, f.Size())
			if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, %v; want the file's %d", len(got), err, len(want))
			}
		})
	}
	if _, err := DirHandler(filepath.Join(root, "nope")).OpenTFTP(context.Background(), &Request{Filename: "x"}); err == nil ||
		errors.Is(err, ErrNotFound) || errors.Is(err, ErrAccess) {
		t.Errorf("a missing root: %v, want a server error", err)
	}
}

// TestDirNetascii serves a text file in netascii mode through the server
// and decodes it back.
func TestDirNetascii(t *testing.T) {
	root := tree(t)
	text := []byte("line one\nline\rtwo\r\n\n")
	if err := os.WriteFile(filepath.Join(root, "t.txt"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	st := start(t, &Server{Handler: DirHandler(root)})
	var buf bytes.Buffer
	res, err := Get(context.Background(), st.addr, "/t.txt", ClientOptions{Netascii: true, BlockSize: 8}, &buf)
	if err != nil || !bytes.Equal(buf.Bytes(), text) || res.Bytes != int64(len(text)) {
		t.Fatalf("Get: %v, %q (%d), want %q", err, buf.Bytes(), res.Bytes, text)
	}
	if tr := st.transfers(t, 1)[0]; tr.Bytes != int64(len(text)+5) {
		t.Errorf("server sent %d bytes, want %d with CRs added", tr.Bytes, len(text)+5)
	}
}
