package proxy

import (
	"net/http"
	"net/url"

	"github.com/hookline/hookline/capture"
)

// BodyCapture is the BodySource of a delivery read from a capture file: the
// bytes that were saved, exactly.
const BodyCapture BodySource = "capture"

// fromCapture returns the delivery saved in a capture file, ready for
// the pipeline: its id, event, method, query, headers and exact body. The
// signature comes from X-Hub-Signature-256 or, when that is absent, the
// legacy X-Hub-Signature (SignatureSHA1 is then true). Timestamp is the time
// the delivery was received. A query string that does not parse keeps the
// parameters that do.
func fromCapture(c capture.Delivery) *Delivery {
	h := c.Headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	d := &Delivery{
		ID:          c.ID,
		Event:       c.Event,
		Method:      c.Method,
		ContentType: h.Get("Content-Type"),
		Headers:     h,
		Body:        c.Body,
		BodySource:  BodyCapture,
		Timestamp:   c.ReceivedAt,
	}
	d.identify()
	if c.Query != "" {
		d.Query, _ = url.ParseQuery(c.Query)
	}
	return d
}
