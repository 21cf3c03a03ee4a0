// Command oci-build writes the OCI image layout of a root file system:
//
//	oci-build -rootfs DIR -out LAYOUT -tag latest -entrypoint /usr/local/bin/anvil-metal3 -port 6385/tcp ...
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/anvilmetal/anvil/deploy/metal3/ociimage"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var cfg ociimage.Config
	var entry, ports, env list
	rootfs := flag.String("rootfs", "", "root file system directory")
	out := flag.String("out", "", "OCI layout directory to write")
	flag.StringVar(&cfg.Tag, "tag", "latest", "reference name")
	flag.StringVar(&cfg.User, "user", "", "user the image runs as")
	flag.Var(&entry, "entrypoint", "entrypoint word (repeat)")
	flag.Var(&ports, "port", "exposed port, e.g. 6385/tcp (repeat)")
	flag.Var(&env, "env", "KEY=VALUE (repeat)")
	flag.Parse()
	if *rootfs == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "oci-build: -rootfs and -out are required")
		os.Exit(2)
	}
	cfg.Entrypoint, cfg.ExposedPorts, cfg.Env = entry, ports, env
	d, err := ociimage.Build(*rootfs, *out, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oci-build:", err)
		os.Exit(1)
	}
	fmt.Println(d.Digest)
}
