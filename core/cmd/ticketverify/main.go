// Command ticketverify checks a ticket the way a gate scanner does, offline:
// the payload from the QR code against the core's ticket public key.
//
//	ticketverify -pub .run/keys/ticket.key.pub 't1.eyJ0aWQiOi....sig'
//	echo "$PAYLOAD" | ticketverify -pub ticket.key.pub
//
// It prints the ticket's claims and exits 0 when the signature holds, 1
// when it does not.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/admission"
)

func main() {
	pubFile := flag.String("pub", ".run/keys/ticket.key.pub", "PEM file of the core's ticket public key")
	flag.Parse()
	pub, err := admission.ReadPublicKeyFile(*pubFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ticketverify:", err)
		os.Exit(2)
	}
	payload := strings.Join(flag.Args(), "")
	if payload == "" {
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		payload = line
	}
	c, err := ticket.Verify(pub, payload)
	if err != nil {
		fmt.Println("INVALID:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	fmt.Printf("VALID ticket, issued %s\n%s\n", c.IssuedAt().Format("2006-01-02 15:04:05 MST"), b)
}
