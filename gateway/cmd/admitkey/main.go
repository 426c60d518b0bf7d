// Command admitkey manages the gateway's admit-token keys: gen writes a new
// Ed25519 key pair; mint signs an admit token with it (for development and
// load tests: in production only the gateway mints).
package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/onsale/onsale/shared/admission"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "mint":
		err = mint(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "admitkey:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: admitkey gen -key FILE [-force] | admitkey mint -key FILE -event ID -account ACCT [-ttl 10m] [-max N]")
	os.Exit(2)
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	key := fs.String("key", "admit.key", "private key file to write; the public key goes to FILE.pub")
	force := fs.Bool("force", false, "overwrite an existing key")
	fs.Parse(args)
	if _, err := os.Stat(*key); err == nil && !*force {
		fmt.Println(*key, "exists; keeping it")
		return nil
	}
	priv, err := admission.GenerateKey()
	if err != nil {
		return err
	}
	if err := admission.WritePrivateKeyFile(*key, priv); err != nil {
		return err
	}
	if err := admission.WritePublicKeyFile(*key+".pub", priv.Public().(ed25519.PublicKey)); err != nil {
		return err
	}
	fmt.Println("wrote", *key, "and", *key+".pub", "kid", admission.KeyID(priv.Public().(ed25519.PublicKey)))
	return nil
}

func mint(args []string) error {
	fs := flag.NewFlagSet("mint", flag.ExitOnError)
	key := fs.String("key", "admit.key", "private key file")
	event := fs.Int64("event", 0, "event id (a positive integer)")
	account := fs.String("account", "", "account id")
	ttl := fs.Duration("ttl", 10*time.Minute, "token lifetime")
	max := fs.Int("max", 0, "ticket limit claim (0: the event's)")
	fs.Parse(args)
	if *event <= 0 || *account == "" {
		return fmt.Errorf("mint needs -event and -account")
	}
	priv, err := admission.ReadPrivateKeyFile(*key)
	if err != nil {
		return err
	}
	tok, err := admission.NewSigner(priv).Admit(*account, *event, *max, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
