package agentclient

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
)

// TokenBytes is how many random bytes an agent token carries, as Python's
// secrets.token_urlsafe() uses by default.
const TokenBytes = 32

// TokenLength is the length of a generated token: 32 bytes in URL-safe
// base64 without padding.
const TokenLength = 43

// MaskedToken is what lookup returns instead of a token that was already
// disclosed once.
const MaskedToken = "******"

// MinAcceptedTokenLength is the shortest token IPA accepts from lookup.
const MinAcceptedTokenLength = 32

// NewToken returns a fresh agent token: TokenBytes random bytes from r (or
// crypto/rand when r is nil), URL-safe base64 encoded without padding. The
// value is a secret; never log it.
func NewToken(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [TokenBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("agentclient: generating agent token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// TokensEqual compares a presented token with the stored one in constant
// time. An empty stored token never matches: a node without a token accepts
// no heartbeat.
func TokensEqual(stored, presented string) bool {
	if stored == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(stored), []byte(presented)) == 1
}
