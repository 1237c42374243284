package relay

import "time"

// CanaryStats are Stats.Canary: what hookline serve's canary measured (its
// round trips through the relay; package internal/canary). The canary
// lives outside the relay, which makes no outbound request of its own.
type CanaryStats struct {
	RoundTripMS float64   `json:"roundTripMs"`         // the last round trip that came back
	At          time.Time `json:"at,omitzero"`         // when it was sent
	Failures    int64     `json:"failures"`            // round trips that did not come back within their time
	LastError   string    `json:"lastError,omitempty"` // why the last one failed, if it did
}
