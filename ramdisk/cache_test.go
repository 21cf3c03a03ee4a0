package ramdisk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestInputsKey(t *testing.T) {
	a := Inputs{"kind": "k", "x": "1", "y": "2"}
	b := Inputs{"y": "2", "kind": "k", "x": "1"}
	if a.Key() != b.Key() {
		t.Error("the key depends on map order")
	}
	// A value may not bleed into the next name.
	c := Inputs{"kind": "k", "x": "1\ny=2"}
	if a.Key() == c.Key() {
		t.Error("different inputs share a key")
	}
	if a.Key() == (Inputs{"kind": "k", "x": "1", "y": "3"}).Key() {
		t.Error("a changed value keeps the key")
	}
}

func TestCacheGet(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	in := Inputs{"kind": "thing", "v": "1"}
	builds := 0
	build := func(dir string) error {
		builds++
		return os.WriteFile(filepath.Join(dir, "out"), []byte("built"), 0o644)
	}
	dir, built, err := c.Get(in, build)
	if err != nil || !built {
		t.Fatalf("first Get = %q, %v, %v", dir, built, err)
	}
	again, built, err := c.Get(in, build)
	if err != nil || built || again != dir || builds != 1 {
		t.Fatalf("second Get = %q, %v, %v after %d builds: want the cached %q", again, built, err, builds, dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "INPUTS")); err != nil || string(b) != "kind=thing\nv=1\n" {
		t.Errorf("INPUTS = %q, %v", b, err)
	}

	boom := errors.New("boom")
	if _, _, err := c.Get(Inputs{"kind": "thing", "v": "2"}, func(dir string) error {
		_ = os.WriteFile(filepath.Join(dir, "half"), nil, 0o644)
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing build: %v", err)
	}
	entries, _ := os.ReadDir(c.Dir)
	if len(entries) != 1 {
		t.Errorf("a failed build left %d entries in the cache, want only the first image", len(entries))
	}
	if _, _, err := c.Get(Inputs{"v": "3"}, build); err == nil {
		t.Error("inputs without a kind were accepted")
	}
}
