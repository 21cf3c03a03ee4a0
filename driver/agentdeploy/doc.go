// Package agentdeploy provides the "direct" deploy interface: deployment
// through the Ironic Python Agent running in a ramdisk on the node, which
// writes the image (and the config drive) itself; and the "agent" inspect
// interface: in-band inspection, where the ramdisk posts its hardware
// inventory to the agent API and the interface's hooks (Ironic's names,
// see NewInspect) turn it into node properties, ports and plugin data; and
// the "agent" raid interface (RAID): in-band software RAID through the
// agent's raid steps; and the "agent" rescue interface (Rescue): the
// agent's ramdisk booted for rescue, whose agent gets the rescue
// password's crypt hash (finalize_rescue) for the ramdisk's rescue user.
//
// The interface declares Ironic's direct deploy steps: deploy.deploy (100,
// boots the ramdisk), deploy.write_image (80, proxied to the agent's
// in-band step), deploy.prepare_instance_boot (60), deploy.tear_down_agent
// (40), deploy.switch_to_tenant_network (30) and deploy.boot_instance
// (20). Agent-based clean and service steps are reported by the agent and
// run in-band by the conductor; this interface only asks for the ramdisk
// to be booted first (PrepareSteps).
//
// # The image
//
// instance_info names the image the agent writes: image_source (an http
// or https URL; its last path segment is the image id IPA caches by),
// optionally image_url (where the agent downloads it, default
// image_source), and a checksum: image_checksum, or image_os_hash_algo
// (md5, sha1, sha224, sha256, sha384 or sha512) with image_os_hash_value.
// image_disk_format and image_container_format are passed on when set
// (a raw image is streamed to disk; anything else IPA converts). A
// partition image (instance_info.image_type "partition", or kernel and
// ramdisk both set) needs root_gb. ImageInfo turns these into the
// image_info IPA's write_image validates, and Validate refuses a deploy
// whose image_info IPA would refuse, before the ramdisk boots.
// image_download_source (instance_info, then driver_info, then
// Options.ImageDownloadSource) is "http", the agent downloads the image
// itself, or "local": the conductor's image cache (Options.Images,
// package imagecache) downloads it once at Prepare and the agent gets the
// node's own cache URL with the served file's SHA-256, released once the
// image is written. An oci:// image_source is resolved in the registry
// (package imagecache/oci): through the cache, or for "http" as its blob
// URL with the digest as checksum when the registry needs no token.
// Anvil has no Glance or Swift. Root device hints
// (properties.root_device) reach the agent with the node's properties.
//
// # Usage
//
//	client, _ := agentclient.NewClient(agentclient.ClientConfig{})
//	reg := driver.NewRegistry(driver.Config{
//		EnabledHardwareTypes: []string{builtin.FakeHardware},
//		EnabledInterfaces: map[driver.Kind][]string{
//			driver.KindDeploy:  {agentdeploy.Name, fake.Name},
//			driver.KindInspect: {agentdeploy.InspectName, fake.Name},
//		},
//	})
//	reg.Register(builtin.Bundle(fake.Config{}))
//	reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client))
//	inspect, _ := agentdeploy.NewInspect(agentdeploy.InspectOptions{}) // default hooks
//	reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, inspect)
//
// The conductor (package baremetal) recognises the deploy interface
// through its AgentBased method, and the inspect interface as a
// driver.InbandInspector; in-band inspection needs the conductor's
// AgentSettings.APIURL (the ramdisk's callback is derived from it).
package agentdeploy
