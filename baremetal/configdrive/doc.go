// Package configdrive builds and checks OpenStack config drives, the small
// ISO 9660 image labelled config-2 that the agent writes to a partition of
// the deployed disk so that cloud-init finds the instance's metadata.
//
// A provision request carries a config drive in one of three forms, as in
// Ironic: a base64 encoded gzip compressed image (stored and passed on as
// is), an http or https URL the agent downloads (beyond Ironic, which
// takes any string with "://", other schemes are refused), or a
// dictionary with meta_data, network_data, user_data and vendor_data from
// which Build renders the image. Parse classifies and validates the
// request value; every rejection is an *Error matching ErrInvalid or
// ErrTooLarge with errors.Is. A decoded image may not exceed MaxSize
// (64 MiB); CheckSize refuses dictionary contents that cannot fit before
// anything is built or stored.
//
// # Usage
//
//	v, err := configdrive.Parse(req.ConfigDrive)
//	if err != nil {
//		return err // *configdrive.Error naming the field
//	}
//	if v.Kind == configdrive.KindContents {
//		encoded, err := configdrive.Build(ctx, configdrive.Node{UUID: id, Name: name}, *v.Contents)
//		...
//	}
//
// Build writes its scratch files in a private temporary directory and
// removes them before it returns; it keeps no state between calls.
package configdrive
