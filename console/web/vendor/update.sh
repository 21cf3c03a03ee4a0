#!/usr/bin/env bash
# Fetches the vendored xterm.js assets from the npm registry. The console
# page loads them from the embedded file system, so a browser needs no
# network. Run from this directory; commit what changes.
set -euo pipefail
cd "$(dirname "$0")"
xterm=6.0.0 # sha512-TQwDdQGtwwDt+2cgKDLn0IRaSxYu1tSUjgKarSDkUM0ZNiSRXFpjxEsvc/Zgc5kq5omJ+V0a8/kIM2WD3sMOYg==
fit=0.11.0  # sha512-jYcgT6xtVYhnhgxh3QgYDnnNMYTcf8ElbxxFzX0IZo+vabQqSPAjC3c1wJrKB5E19VwQei89QCiZZP86DCPF7g==
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@xterm/xterm@$xterm" "@xterm/addon-fit@$fit" >/dev/null)
mkdir -p "$tmp/x" "$tmp/f"
tar -xzf "$tmp/xterm-xterm-$xterm.tgz" -C "$tmp/x"
tar -xzf "$tmp/xterm-addon-fit-$fit.tgz" -C "$tmp/f"
cp "$tmp/x/package/lib/xterm.js" "$tmp/x/package/css/xterm.css" xterm/
cp "$tmp/x/package/LICENSE" xterm/LICENSE
cp "$tmp/f/package/lib/addon-fit.js" xterm/addon-fit.js
cp "$tmp/f/package/LICENSE" xterm/LICENSE.addon-fit
