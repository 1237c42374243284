// Package httpx holds hookline's HTTP helpers that are not rest's: what a
// replayed request must not carry on (the one list of hop-by-hop headers,
// for the forwarder and the relay), header-list syntax, redaction of
// credentials in what hookline prints, and recognising certificate errors.
// The helpers rest needs as well (header syntax, Retry-After, backoff) live
// in the rest module, which cannot import this one, and hookline uses them
// from there: rest/header and rest/backoff define how rest's RetryPolicy
// reads Retry-After and waits.
package httpx
