// Package mask is Anvil's one secret masker: one list of secret key names
// and one scanner of free text, behind every public masking function
// (baremetal.MaskSecrets, baremetal.MaskText, baremetal.IsSensitiveKey,
// Node.Masked, agentclient.MaskSecrets, driver.Mask), so a node view, a
// history line, a last_error, the agent's lookup answer and a driver log
// all hide the same things. It is internal so that the rules have one
// home every package can import (driver and agentclient must not import
// baremetal); the public functions stay as thin wrappers for API
// compatibility and for vendors outside this module.
//
// # Secret keys
//
// IsSecretKey decides on the key alone. The key is lower-cased and its
// separators ('_', '-', '.', ' ') are removed ("Admin-Pass" and
// "admin_pass" both read "adminpass"); it is a secret when that contains
// one of:
//
//   - the fragments of oslo.utils' mask_dict_password (reference §10.3):
//     adminpass, password, authtoken, newpass, authpassword, secretuuid,
//     secret, syspswd, token, configdrive, chappassword, encryptedkey,
//     privatekey, fernetkey, sslkey, passphrase, and its deployment-tool
//     keys (cephclusterfsid ... chapsecret);
//   - snmpauthkey and snmpprivkey, which Ironic's node_sanitize masks too;
//   - beyond Ironic: passwd, pswd, credential, authorization, apikey,
//     accesskey, authkey, privkey (key-like names; a bare "key", a
//     public_key, a key_name or a key_file are not secrets).
//
// A key is also a secret when its last word (split at separators and at a
// lower-to-upper case change) is pass, pwd or pw: bmc_pass, ipmiPass,
// root-pwd. A word that only ends in "pass" (bypass, compass) is not.
//
// # Maps
//
// Map replaces the value of every secret key with Placeholder, whatever
// its type (a nil value stays nil: absence is no secret), recurses into
// the nested maps and lists of other keys, and scans their strings with
// Text.
//
// # Free text
//
// Text masks a value only where a secret key is written next to it with a
// separator, and only the value: it never removes a word that is not a
// secret. The forms, each with a secret key (by IsSecretKey):
//
//   - key=value and key = value (query strings, --flag=value, logfmt); the
//     value ends at white space, a quote, or one of & , ; ) ] } < >, and a
//     quoted value ("..." or '...') is masked inside its quotes;
//   - "key": "value", 'key': 'value' and "key": 123 (JSON, Python repr);
//     null, true, false, objects and arrays are left alone;
//   - key: "value" and key: 'value' (an unquoted key before a quoted value);
//   - key:value with nothing between the colon and the value (Go's %v of
//     maps and structs: map[password:x], {Password:x}), and key:[v1 v2]
//     (an http.Header);
//   - <key>value</key>;
//   - the password of a URL's userinfo: scheme://user:password@host;
//   - Authorization: Basic|Bearer|Negotiate <credentials>;
//   - after the word ipmitool on a line, the values of -P (password), -k
//     and -y (the BMC key): "ipmitool -I lanplus -U admin -P x power on".
//
// A key followed by a colon, white space and an unquoted word ("password:
// is required", "configdrive: contents exceed 67108864 bytes") is prose,
// not a secret, and is left alone, as oslo's mask_password does; so is
// "--password value", which reads the same as "missing --password
// argument". Write such a value as key=value or quote it to have it
// masked. Empty values are left as they are.
package mask
