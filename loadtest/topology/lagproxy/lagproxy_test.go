package lagproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
)

// upstream is a server that writes whatever is sent on its channel to the
// one connection it accepts, and echoes what it reads back on got.
func upstream(t *testing.T) (addr string, send chan<- string, got <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s, g := make(chan string), make(chan string, 10)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go func() {
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				g <- line
			}
		}()
		for m := range s {
			c.Write([]byte(m))
		}
	}()
	return ln.Addr().String(), s, g
}

func TestFreezeThawDrop(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop bool // Drop instead of Thaw
		want string
	}{
		{"thaw delivers what was held back", false, "a\nb\nc\n"},
		{"drop discards what was held back", true, "a\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, send, got := upstream(t)
			p, err := New("127.0.0.1:0", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			send <- "a\n"
			if line, err := r.ReadString('\n'); err != nil || line != "a\n" {
				t.Fatalf("before Freeze: %q, %v", line, err)
			}
			p.Freeze()
			send <- "b\n"
			// the client's bytes still reach the upstream while frozen
			c.Write([]byte("feedback\n"))
			if g := <-got; g != "feedback\n" {
				t.Fatalf("upstream got %q", g)
			}
			send <- "c\n"
			var rest string
			if tc.drop {
				p.Drop()
				b, _ := io.ReadAll(r)
				rest = string(b)
			} else {
				p.Thaw()
				for len(rest) < len("b\nc\n") {
					line, err := r.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					rest += line
				}
			}
			if all := "a\n" + rest; all != tc.want {
				t.Errorf("client read %q; want %q", all, tc.want)
			}
			close(send)
		})
	}
}
