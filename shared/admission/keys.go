package admission

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// KeyID derives a stable key id from a public key: the first 16 characters
// of the base64url SHA-256 of the raw key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:])[:16]
}

// GenerateKey returns a fresh Ed25519 key pair.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

// WritePrivateKeyFile writes priv as a PKCS#8 PEM file readable only by its owner.
func WritePrivateKeyFile(path string, priv ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("marshal private key: %w", err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// WritePublicKeyFile writes pub as a PKIX PEM file.
func WritePublicKeyFile(path string, pub ed25519.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("marshal public key: %w", err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// ReadPrivateKeyFile reads a PKCS#8 PEM Ed25519 private key.
func ReadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	k, err := readPEM(path, x509.ParsePKCS8PrivateKey)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return priv, nil
}

// ReadPublicKeyFile reads a PKIX PEM Ed25519 public key.
func ReadPublicKeyFile(path string) (ed25519.PublicKey, error) {
	k, err := readPEM(path, x509.ParsePKIXPublicKey)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return pub, nil
}

func readPEM(path string, parse func([]byte) (any, error)) (any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := parse(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// JWK is one Ed25519 public key in JSON Web Key form (RFC 8037).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use,omitempty"`
	Alg string `json:"alg,omitempty"`
}

// JWKS is a JSON Web Key Set as served at /.well-known/jwks.json.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// NewJWKS publishes the given public keys.
func NewJWKS(pubs ...ed25519.PublicKey) JWKS {
	s := JWKS{Keys: make([]JWK, 0, len(pubs))}
	for _, p := range pubs {
		s.Keys = append(s.Keys, JWK{Kty: "OKP", Crv: "Ed25519", Use: "sig", Alg: "EdDSA",
			X: base64.RawURLEncoding.EncodeToString(p), Kid: KeyID(p)})
	}
	return s
}

// ParseJWKS returns the Ed25519 keys of a JWKS document by key id. Keys of
// other types are ignored; a set without a usable key is an error.
func ParseJWKS(b []byte) (map[string]ed25519.PublicKey, error) {
	var s JWKS
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse jwks: %w", err)
	}
	keys := make(map[string]ed25519.PublicKey)
	for _, k := range s.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || (k.Alg != "" && k.Alg != "EdDSA") {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		kid := k.Kid
		if kid == "" {
			kid = KeyID(x)
		}
		keys[kid] = ed25519.PublicKey(x)
	}
	if len(keys) == 0 {
		return nil, errors.New("parse jwks: no Ed25519 keys")
	}
	return keys, nil
}
