// Package relay is the webhook relay behind `hookline serve`: deliveries
// POSTed to a channel URL are pushed to every subscriber of the channel as
// Server-Sent Events. It speaks smee.io's protocol, so smee-client works
// against it unchanged, and adds durable per-channel event ids, replay after
// Last-Event-ID, exact body bytes for clients that ask, and a live page.
//
//	ln, err := net.Listen("tcp", "127.0.0.1:3333")
//	if err != nil { ... }
//	srv, err := relay.New(relay.Options{DataDir: "/var/lib/hookline"})
//	if err != nil { ... } // relay.ErrDataDirInUse: another relay has the directory
//	channel := relay.ListenURL(ln.Addr()) + "/" + srv.NewChannel()
//	err = srv.Serve(ctx, ln) // until ctx ends; then a graceful shutdown
//
// Options choose where the history lives: in memory (the zero Options),
// in a bbolt file (DataDir: survives restarts and crashes, every POST is
// on disk before it is answered), or in a storage engine of its own
// (Store, a [Store]: package relay/redisstore keeps it in Redis, shared by
// several relays behind one URL).
//
// A [Server] is also an [net/http.Handler] to mount in another server; call
// [Server.Close] when that server shuts down, so that the streams end, then
// [Server.CloseStorage] once it has shut down.
//
// Routes:
//
//	GET|HEAD /new                       307, Location and body: a new channel URL; with Accept: text/plain
//	                                    (or a gosmee User-Agent) 200 and the URL as text, as gosmee; with
//	                                    Accept: application/json 200 {"url":…}
//	GET      /new?private=1             the same for a private channel, with its read token: {"url","token"},
//	                                    or the URL with ?token= (every channel, with Options.PrivateOnly)
//	PUT|DELETE /<channel>/secret        bind a private channel to a webhook secret (the body), or unbind it
//	POST     /<channel>                 any body and content type: 200 {"id":N,"subscribers":K} once stored
//	GET      /<channel>                 Accept: text/event-stream: the stream
//	GET|HEAD /<channel>                 otherwise: the channel's page
//	GET      /events/<channel>          the stream in a gosmee server's format, for gosmee's client
//	POST     /<channel>/redeliver/<id>  publish delivery <id> again
//	GET      /<channel>/body/<id>?s=T   a body sent by link to the stream T names (hookline's format)
//	GET      /healthz                   200 {"status":"ok", counts...}; 200 "degraded" when uploads were
//	                                    refused in the last minute; 503 when shutting down, when a shared
//	                                    store (Redis) is down or the history cannot be written
//	GET      /version                   200 {"server":"hookline"} (gosmee's client asks first)
//	GET      /metrics                   Options.Metrics (hookline serve: Prometheus), when set; a
//	                                    channel named "metrics" is then not reachable
//
// The gosmee format is chmouel/gosmee v0.32's (server.go): lowercase
// headers, "timestamp" as a string, "bodyB" and no "body"; the stream
// starts with {"message":"connected"} and {"message":"ready"}, idles with
// ": keepalive" comments and reports a gap as gosmee-gap. Ids and
// Last-Event-ID work as on every stream. A channel named "version" is not
// reachable; "events" is, except for GET /events/<name>.
//
// A stream starts with a "ready" event (data {"last":N}, the channel's last
// id), replays the history after
// Last-Event-ID (or ?lastEventId=), then sends deliveries as they arrive
// and a "ping" every 30 s. The message format is smee.io's; a subscriber
// that sends X-Hookline-Stream: 1 (or ?hookline=1) gets hookline's: a
// JSON body that "body" can hold byte for byte there, with "bodyB": null,
// any other body in "bodyB" (base64) in place of "body", and a body of
// 1 MiB or more as "bodyLink", a URL to GET it from. Errors are JSON: {"error":"what went
// wrong and what to do"}.
//
// Reading a private channel (its stream in every format, page, bodies,
// redeliveries, secret) needs its token, as "Authorization: Bearer" or
// ?token=: see access.go.
//
// docs/RELAY.md holds the rules the relay follows and why: channel names,
// message keys, ids and gaps, Idempotency-Key, storage, replicas, limits.
package relay
