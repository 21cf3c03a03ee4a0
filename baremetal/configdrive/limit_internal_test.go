package configdrive

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// The size limit is exercised with a small limit: the logic is the same as
// with MaxSize and the suite stays fast.
func TestSizeLimit(t *testing.T) {
	if MaxSize != 64*1024*1024 {
		t.Fatalf("MaxSize = %d, want 64 MiB", MaxSize)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(make([]byte, 4097))
	zw.Close()
	enc := base64.StdEncoding.EncodeToString(buf.Bytes())
	if _, err := decode(enc, 4096); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("decode(4097 bytes, limit 4096) err = %v, want ErrTooLarge", err)
	}
	if img, err := decode(enc, 4097); err != nil || len(img) != 4097 {
		t.Fatalf("decode(4097 bytes, limit 4097) = %d bytes, %v", len(img), err)
	}
	_, err := build(context.Background(), Node{}, Contents{UserData: strings.Repeat("x", 3000)}, 4096)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("build(2×3000 bytes, limit 4096) err = %v, want ErrTooLarge", err)
	}
	// Files fit but the ISO framing (system area, descriptors) does not.
	_, err = build(context.Background(), Node{}, Contents{UserData: "x"}, 4096)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("build(tiny, limit 4096) err = %v, want ErrTooLarge for the image", err)
	}
}

// TestCheckImageAgreesWithDecode checks the counting check ParseString
// uses refuses and accepts exactly what decode does.
func TestCheckImageAgreesWithDecode(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 4097, 10000} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(make([]byte, n))
		zw.Close()
		enc := base64.StdEncoding.EncodeToString(buf.Bytes())
		_, derr := decode(enc, 4096)
		cerr := checkImage(enc, 4096)
		if errors.Is(derr, ErrTooLarge) != errors.Is(cerr, ErrTooLarge) || (derr == nil) != (cerr == nil) {
			t.Errorf("%d bytes: decode %v, checkImage %v", n, derr, cerr)
		}
	}
	for _, bad := range []string{"!!!", base64.StdEncoding.EncodeToString([]byte("plain"))} {
		if err := checkImage(bad, 4096); !errors.Is(err, ErrInvalid) {
			t.Errorf("checkImage(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
