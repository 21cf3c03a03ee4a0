package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/internal/vmlab"
)

// TestMissingPrereqs checks the one-line messages and that the Debian
// packages to install are listed once each, in order.
func TestMissingPrereqs(t *testing.T) {
	no := func() bool { return false }
	missing := []missingPrereq{
		{prereq{what: "ipmi_sim", have: no, pkgs: []string{"openipmi"}}},
		{prereq{what: "apt-get", have: no, pkgs: []string{"apt"}}},
		{prereq{what: "apt-cache", have: no, pkgs: []string{"apt"}}},
		{prereq{what: "root", have: no, hint: "run as root"}},
	}
	if got := packagesOf(missing); !slices.Equal(got, []string{"openipmi", "apt"}) {
		t.Errorf("packages %v", got)
	}
	if got := missing[0].String(); got != "ipmi_sim (Debian package openipmi)" {
		t.Errorf("message %q", got)
	}
	if got := missing[3].String(); got != "root (run as root)" {
		t.Errorf("message %q", got)
	}
}

// TestPrereqsNameTheTarball checks that a missing IPA source is reported
// with where to give it, and that every installable check names a
// package.
func TestPrereqsNameTheTarball(t *testing.T) {
	tarball := filepath.Join(t.TempDir(), "ipa.tar.gz")
	var found bool
	for _, m := range checkPrereqs(tarball) {
		if strings.Contains(m.what, tarball) {
			found = true
			if !strings.Contains(m.String(), vmlab.IPATarballEnv) {
				t.Errorf("tarball message %q", m)
			}
		}
	}
	if !found {
		t.Error("a missing tarball is not reported")
	}
	for _, p := range prereqs(tarball) {
		if len(p.pkgs) == 0 && p.hint == "" {
			t.Errorf("%s: neither a package nor a hint", p.what)
		}
	}
}

// TestFindTarball checks the flag, then the environment, then the
// default beside the repository.
func TestFindTarball(t *testing.T) {
	t.Setenv(vmlab.IPATarballEnv, "/env/ipa.tar.gz")
	if got, _ := findTarball("/flag/ipa.tar.gz"); got != "/flag/ipa.tar.gz" {
		t.Errorf("flag: %q", got)
	}
	if got, _ := findTarball(""); got != "/env/ipa.tar.gz" {
		t.Errorf("env: %q", got)
	}
	t.Setenv(vmlab.IPATarballEnv, "")
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(filepath.Dir(root), "shared", "peers", "ironic-python-agent-2023.1.tar.gz")
	if got, _ := findTarball(""); got != want {
		t.Errorf("default: %q, want %q", got, want)
	}
}

func TestSummary(t *testing.T) {
	var b bytes.Buffer
	printSummary(&b, []stage{{name: "inspect", took: 1500 * time.Millisecond}}, 2*time.Second)
	for _, w := range []string{"STAGE", "inspect  1.5", "total    2.0"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("summary %q lacks %q", b.String(), w)
		}
	}
}
