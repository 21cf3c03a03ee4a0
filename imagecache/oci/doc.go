// Package oci resolves the oci:// image sources of Ironic (2025.1 and
// later) to the one registry blob that is a node's disk image, over the
// OCI distribution API.
//
// A reference is oci://registry[:port]/repository[:tag][@sha256:hex]. The
// manifest it names may be an OCI image manifest or index, or a Docker
// schema 2 manifest or manifest list. An index picks the node's
// architecture (platform.architecture; x86_64 and amd64 are one, as are
// aarch64 and arm64) and, by the entries' "disktype" annotation, the disk
// format Ironic prefers for the download source: qcow2 first when the
// conductor downloads the image itself ("local"), raw first otherwise.
// The chosen manifest must have exactly one layer, the disk image; its
// digest is the image's checksum, so no other checksum is required.
//
// Registries that want credentials are answered as the distribution
// specification describes: a Basic challenge with a user name and
// password, a Bearer challenge with a token fetched from the realm the
// registry names, with the node's image_pull_secret or, lacking one, the
// secret of [oci]authentication_config for the registry's host. HTTPS is
// used; HTTP only when [oci]permit_fallback_to_http_transport allows it
// and HTTPS cannot be spoken.
//
// Differences from Ironic: a pull secret that is base64 "user:password"
// (the auth value of a container config.json) is used as that user and
// password, and the configured secrets are looked up by the registry's
// host rather than the token realm's; a tag naming a single-layer
// manifest directly is accepted (Ironic looks for an index).
//
// Usage:
//
//	r := oci.NewResolver(oci.Options{})
//	a, err := r.Resolve(ctx, oci.Request{Ref: src, CPUArch: "x86_64", DownloadSource: "local", PullSecret: secret})
//	if err != nil { ... }
//	rc, err := a.Open(ctx) // the blob; verify it against a.Digest
//
// Package ocitest runs Debian's docker-registry for tests.
package oci
