package main

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
	"github.com/onsale/onsale/shared/config/configtest"
)

func TestMint(t *testing.T) {
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	if err := admission.WritePrivateKeyFile(keyFile, priv); err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := config.Load(&c, []string{"-signing-key", keyFile, "-venue", "1", "-gate", "3", "-name", "asha", "-ttl", "2h"}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	tok, exp, err := mint(c)
	if err != nil || time.Until(exp) < time.Hour {
		t.Fatalf("mint = %v, %v", exp, err)
	}
	st, err := ticket.NewStaffVerifier(priv.Public().(ed25519.PublicKey)).Verify(tok)
	if err != nil || st != (core.Staff{Name: "asha", Venue: 1, Gate: "3"}) {
		t.Fatalf("Verify = %+v, %v", st, err)
	}
	for _, args := range [][]string{{"-venue", "1", "-gate", "3"}, {"-venue", "0", "-gate", "3", "-name", "a"}, {"-venue", "1", "-name", "a"}} {
		var c Config
		if err := config.Load(&c, args, func(string) (string, bool) { return "", false }); err == nil {
			t.Errorf("Load(%q) accepted", args)
		}
	}
}

// docs/configuration.md's table of stafftoken's settings is generated from Config.
func TestConfigDoc(t *testing.T) {
	configtest.CheckDoc(t, "../../../docs/configuration.md", "stafftoken", &Config{})
}
