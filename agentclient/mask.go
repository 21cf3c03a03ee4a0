package agentclient

import "strings"

// isSecretKey reports whether a dictionary key names a secret: whether it
// contains, lower-cased, one of the fragments oslo.utils'
// mask_dict_password looks for.
func isSecretKey(k string) bool {
	fragments := [...]string{
		"adminpass", "admin_pass", "password", "admin_password", "auth_token",
		"new_pass", "auth_password", "secret_uuid", "secret", "sys_pswd", "token",
		"configdrive", "chappassword", "encrypted_key", "private_key", "fernetkey",
		"sslkey", "passphrase", "cephclusterfsid", "octaviaheartbeatkey",
		"rabbitcookie", "cephmanilaclientkey", "pacemakerremoteauthkey",
		"designaterndckey", "cephadminkey", "heatauthencryptionkey",
		"cephclientkey", "keystonecredential", "barbicansimplecryptokek",
		"cephrgwkey", "swifthashsuffix", "migrationsshkey", "cephmdskey",
		"cephmonkey", "chapsecret",
	}
	k = strings.ToLower(k)
	for _, f := range fragments {
		if strings.Contains(k, f) {
			return true
		}
	}
	return false
}

// MaskSecrets returns a deep copy of m in which every value whose key names
// a secret is replaced by "******", recursing into nested objects and
// lists, as Ironic masks a node before sending it to the agent. m is not
// modified.
func MaskSecrets(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if isSecretKey(k) {
			out[k] = MaskedToken
			continue
		}
		out[k] = maskValue(v)
	}
	return out
}

func maskValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return MaskSecrets(t)
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = maskValue(e)
		}
		return c
	default:
		return v
	}
}
