// Package imagecache is the conductor's image cache, Ironic's
// image_download_source = local: the conductor downloads a node's image
// itself and serves it to the ramdisk agent from its own HTTP endpoint.
// It is the only way the Ironic Python Agent 2023.1 can deploy an oci://
// image, and it saves the origin the traffic of many nodes deploying one
// image.
//
// A Cache downloads each image once, bounded in size and time, and
// verifies it against its checksum (image_checksum, a checksum file's
// URL, or image_os_hash_algo/_value) or, for oci:// sources resolved by
// package oci, the registry digest. Concurrent requests for one image
// wait for the one download, and a failed download fails every one of
// them with its cause. With force_raw_images a qcow2 image is converted
// to raw by qemu-img under an address-space and CPU-time limit (as
// Ironic's qemu_img module runs it, through prlimit), after its header
// was checked for a backing or external data file; formats outside
// [conductor]permitted_image_formats are refused.
//
// The cache is one directory shared by all nodes: one copy per image,
// held by the nodes it is served to (reference counts); at clean-up (after
// each download and every [conductor]cache_clean_up_interval, Run)
// unused images older than the TTL go, then the least recently used
// unused ones while the cache is larger than its size; before a download
// or a conversion, unused images are removed until the disk has room, as
// Ironic's master image cache does. A restarted conductor keeps the
// complete images it finds.
//
// Each node gets its own unguessable URL (URLBase/<256 random bits>),
// served by Handler with ranges, that stops working when the deploy
// interface releases the node (ReleaseNode) or its grant expires. The
// cache knows nothing of nodes' states.
//
// Usage:
//
//	c, err := imagecache.New(imagecache.Options{Dir: dir, URLBase: "http://192.0.2.1:6385/images/"})
//	mux.Handle("/images/", c.Handler())
//	go c.Run(ctx, 0)
//	img, err := c.NodeImage(ctx, node, imagecache.Request{Source: src, Checksum: sum, ForceRaw: true})
//	// give img.URL, img.HashAlgo and img.HashValue to the agent; then
//	c.ReleaseNode(node)
package imagecache
