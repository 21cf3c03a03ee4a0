#!/bin/sh
# Builds the anvild container image that replaces Metal3's Ironic, as an
# OCI image layout, without a container daemon:
#
#   deploy/metal3/build-image.sh [OUT]        (OUT default: ./anvil-metal3.oci)
#
# The image holds anvild, the ipmi and redfish driver plugins and the
# anvil-metal3 entrypoint (static Go binaries), and ipmitool with the
# shared libraries it needs, unpacked from this machine's Debian
# packages (apt-get download; no base image is pulled from any
# registry). Load the layout with any OCI tool, e.g.
#   skopeo copy oci:anvil-metal3.oci:latest docker://registry.example/anvil:latest
#   podman load -i anvil-metal3.oci   (or: podman pull oci:anvil-metal3.oci)
# Same sources and the same Debian packages give the same image digest.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$PWD/anvil-metal3.oci}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/usr/local/bin" "$root/var/lib/anvil" "$root/run/anvil" "$root/shared/html" "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"

cd "$repo"
CGO_ENABLED=0 go build -trimpath -o "$root/usr/local/bin/" \
	./cmd/anvild ./cmd/anvil-driver-ipmi ./cmd/anvil-driver-redfish ./deploy/metal3/anvil-metal3

# ipmitool and the closure of its run-time dependencies, from Debian.
debs=$work/debs
mkdir -p "$debs"
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
	--no-breaks --no-replaces --no-enhances ipmitool | grep '^[a-z0-9]' | sort -u)
(cd "$debs" && apt-get download $pkgs)
for d in "$debs"/*.deb; do
	dpkg-deb -x "$d" "$root"
done
# Documentation is not needed at run time.
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info"
# The user the manifests run as (Metal3's ironic user: 997/994).
printf 'root:x:0:0:root:/root:/bin/sh\nironic:x:997:994:ironic:/var/lib/anvil:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nironic:x:994:\n' >"$root/etc/group"
# Make every file's time the same, for a reproducible layer.
find "$root" -exec touch -h -d @0 {} +

go run ./deploy/metal3/ociimage/oci-build -rootfs "$root" -out "$out" -tag latest \
	-entrypoint /usr/local/bin/anvil-metal3 -user 997:994 \
	-port 6385/tcp -port 6180/tcp -port 69/udp \
	-env PATH=/usr/local/bin:/usr/bin:/bin -env XDG_DATA_HOME=/var/lib/anvil
