package ocitest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// sign makes the registry's JWT: ES256, the signing certificate in the
// x5c header (the registry verifies it against its root bundle), the
// distribution specification's claims.
func (ts *TokenServer) sign(subject string, access []map[string]any) (string, error) {
	if ts.key == nil {
		return "", errNoKey
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	now := time.Now()
	claims := jwt.MapClaims{
		"iss": tokenIssuer, "sub": subject, "aud": tokenService,
		"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(),
		"jti": hex.EncodeToString(jti), "access": access,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["x5c"] = []string{base64.StdEncoding.EncodeToString(ts.certDER)}
	return tok.SignedString(ts.key)
}
