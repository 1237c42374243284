package httpx

import "net/http"

// writeBufferSize is the transport's write buffer per connection: a request
// whose headers and body fit go out in one write system call. With net/http's
// default (4 KiB) a 4 KiB webhook took two (the headers, then the body), and
// net/http's client was 37 % of the forwarder's CPU on loopback. 64 KiB
// covers nearly every webhook (GitHub's are typically 5 to 30 KiB).
const writeBufferSize = 64 << 10

// readBufferSize is the read buffer per connection, for the same reason: an
// event of a relay's stream (a 4 KiB webhook in base64 is a 6 KiB event) is
// read in one system call rather than two or three of 4 KiB.
const readBufferSize = 64 << 10

// NewTransport returns the transport for requests to targets and relays: a
// copy of net/http's default that never asks for compression (a replayed
// request carries only the headers its sender sent, and net/http would add
// Accept-Encoding: gzip), writes a request of up to 64 KiB in one system
// call and reads up to 64 KiB in one.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.WriteBufferSize = writeBufferSize
	t.ReadBufferSize = readBufferSize
	return t
}
