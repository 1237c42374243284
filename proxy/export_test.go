package proxy

import "github.com/hookline/hookline/capture"

// SetCaptureWriter replaces how c writes capture files, so tests can inject
// write errors (a full disk) without one.
func SetCaptureWriter(c *Client, write func(dir string, d capture.Delivery) (string, error)) {
	c.writeCapture = write
}
