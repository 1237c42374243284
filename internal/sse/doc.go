// Package sse is hookline's relay stream reader: one connection attempt
// over github.com/r3labs/sse/v2 ([HTTPTransport], with the size limit of
// limit.go and the body reader of body.go that neutralise r3labs' defects),
// and the reconnect loop around it ([Subscribe]: jittered backoff, idle
// detection, Last-Event-ID and the rule that decides whether a relay's ids
// are durable).
//
// Subscribe classifies every event once (wire.Classify) and hands it over
// with what it learned: Event.Kind (delivery, control or gap) and
// Event.Durable (whether its id may be stored and sent back). The proxy
// package decodes deliveries and decides nothing of that again.
//
// docs/PROXY.md holds the rules and why: event ids and resuming, and the
// r3labs defects.
package sse
