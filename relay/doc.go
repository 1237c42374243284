// Package relay is the webhook relay behind `hookline serve`: deliveries
// POSTed to a channel URL are pushed to every subscriber of the channel as
// Server-Sent Events. It speaks smee.io's protocol, so smee-client works
// against it unchanged, and adds durable per-channel event ids, replay after
// Last-Event-ID, exact body bytes for clients that ask, and a live page.
//
// Usage:
//
//	ln, err := net.Listen("tcp", "127.0.0.1:3333")
//	if err != nil { ... }
//	srv, err := relay.Open(relay.Options{DataDir: "/var/lib/hookline"}) // or relay.New(relay.Options{}): history in memory
//	if err != nil { ... } // relay.ErrDataDirInUse: another relay has the directory
//	// or relay.Open(relay.Options{RedisURL: "redis://redis.internal:6379"}): history in Redis, shared by replicas
//	channel := relay.ListenURL(ln.Addr()) + "/" + srv.NewChannel()
//	err = srv.Serve(ctx, ln) // until ctx ends; then a graceful shutdown
//
// A Server is also an http.Handler (ServeHTTP) to mount in another server;
// call Close when that server shuts down, so that the streams end, then
// CloseStorage once it has shut down, to close the history file (or the
// connections to Redis).
//
// # Routes
//
//	GET|HEAD /new                    307, Location: a new channel URL
//	POST     /<channel>              any body and content type: 200 {"id":N} once stored
//	GET      /<channel>              Accept: text/event-stream: the stream
//	GET|HEAD /<channel>              otherwise: the channel's page
//	POST     /<channel>/redeliver/<id>  publish delivery <id> again: 200 {"id":M,"redeliveryOf":id}
//	GET      /healthz                200 {"status":"ok", counts...} (503 while shutting down, or
//	                                 when Redis does not answer: {"status":"redis unreachable","error":...})
//	GET      /                       a short page with a "new channel" button
//	GET      /assets/<file>          the page's script, style and icon (embedded)
//
// OPTIONS answers CORS preflights for any origin, as smee.io does; streams
// and POST answers carry Access-Control-Allow-Origin: *. Other methods get
// 405 with Allow. Errors are JSON: {"error":"what went wrong and what to do"}.
//
// # Channels
//
// A channel name is 1 to 128 characters of A-Z a-z 0-9 - _ (smee.io's rule).
// Anything else (dots, %-escapes such as %2F, longer names) gets 404 with a
// message saying the rule; so do paths deeper than the routes above. Channels
// need no creation: any valid name works, and GET /new hands out a random one
// (128 bits from crypto/rand, 22 characters of base64url; smee.io uses 96).
// The name is the only secret guarding a channel.
//
// GET /new builds the URL from Options.PublicURL when set. Otherwise, as
// smee.io, from the request: the scheme of X-Forwarded-Proto (http or https)
// or of the connection, and the host of X-Forwarded-Host or Host. Trusting
// those headers is safe here because the URL goes back only to the client
// that sent them; behind a reverse proxy, prefer PublicURL.
//
// # Messages
//
// On connect a stream gets "event: ready" with data {}, then "event: ping"
// with data {} every Options.PingInterval (30 s) of silence. Each delivery is
// an unnamed event whose data is smee.io's JSON:
//
//	id: 7
//	data: {"content-type":"application/json","host":"relay.example.com","x-github-event":"push",...,"body":{...},"query":{},"timestamp":1700000000000}
//
// Its keys:
//
//   - every request header as a lowercase key with a string value, sorted by
//     name; repeated fields are joined with ", " ("; " for cookie), as Node's
//     req.headers; host is included, as on smee.io;
//   - body: for application/json (or any +json type) the JSON exactly as sent,
//     byte for byte (never re-encoded; a line break inside it, which can only
//     be JSON whitespace, continues the event on a new data: line, which SSE
//     clients join with "\n"); for application/x-www-form-urlencoded the
//     object Express's urlencoded({extended: true}) parser makes, as smee.io
//     (qs rules: a[b]=c nests, a[]=x and repeated keys make arrays, at most
//     1000 parameters); for anything else, or JSON that does not parse, {}
//     (smee.io's Express gives {} too, and answers 400 to invalid JSON where
//     the relay accepts and relays it);
//   - query: the query string as Express's qs parser makes it;
//   - timestamp: the time the relay received the delivery, in epoch ms.
//
// smee-client forwards every key other than body and query as a request
// header (timestamp included, as with smee.io) and passes sec-fetch-mode to
// fetch as its mode. So that it never gets a header that fetch refuses or a
// target rejects, the relay leaves out of every message the hop-by-hop
// headers (Connection and the fields it names, Keep-Alive,
// Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer,
// Transfer-Encoding, Upgrade, Expect), request headers named like message
// keys (body, query, timestamp, bodyb, rawdata), and, from smee-shaped
// messages only, a sec-fetch-mode other than cors, no-cors or same-origin;
// and it refuses (431) a delivery whose headers exceed 16 KiB, Node's limit,
// which smee.io and most targets enforce.
//
// # Extended messages
//
// A stream opened with ?hookline=1 (StreamQuery; what the page uses, since a
// browser's EventSource cannot set headers) or the header
// X-Hookline-Stream: 1 (StreamHeader) gets the same messages plus "bodyB":
// the exact body bytes in standard base64 with padding. Form-encoded and
// binary bodies, and JSON with CRLF, survive byte-exact only there. Plain
// subscribers never get bodyB: smee-client would send it on as a header of up
// to 33 MiB.
//
// # Event ids, history and replay
//
// Every delivery gets the channel's next id (1, 2, 3, ...) as its SSE id, for
// every subscriber, plain or extended: smee-client's EventSource ignores ids
// in its messages but remembers the last one and sends it as Last-Event-ID
// when it reconnects, so it too resumes without loss. Control events (ready,
// ping, hookline-gap) carry no id, so Last-Event-ID always names a delivery.
//
// Each channel keeps its last Options.HistoryCount deliveries within
// Options.HistoryBytes (the newest is kept even if larger), and all channels
// together within Options.TotalHistoryBytes (channels posted to least
// recently lose their oldest deliveries first). With Options.HistoryAge, a
// channel that receives a delivery drops those it received longer ago. A
// channel with neither history nor subscribers is forgotten, and its ids
// start again at 1. With Options.DataDir or Options.RedisURL the history,
// and so the ids, survive a restart (see Storage); without them they live
// in memory.
//
// A stream opened with Last-Event-ID: N gets every retained delivery after N,
// in order, before any live one; none is lost or repeated between the replay
// and the live stream. A client without the header gets only new deliveries
// (smee.io's behaviour); the query parameter ?lastEventId=N (LastEventIDQuery)
// stands in for the header when a client cannot send it, and the header wins
// when both are present. When deliveries after N have already left the
// history, an event precedes the replay:
//
//	event: hookline-gap
//	data: {"from":5,"to":9,"reason":"expired","lastEventId":"4"}
//
// saying that deliveries 5 to 9 (inclusive) will not come; deliveries that
// leave the history while a long replay is still being read are announced
// the same way. A Last-Event-ID that is not a decimal integer from 0 to the
// channel's last id (garbage, or an id from before a restart of a relay
// whose history is in memory, or of a forgotten channel) is treated as 0
// and always announced, with reason "unknown", from 1 to the id before the
// first replayed delivery (to < from when no id of this channel was lost,
// only possibly some from before the restart).
//
// # Retries and Idempotency-Key
//
// A POST answered 200 is stored (see Storage) and will be relayed; a POST
// that got no answer (the relay died, the connection broke) may or may not
// have been stored, and the sender should send it again. So that the retry
// is not relayed twice, a sender may give the POST an Idempotency-Key
// header (as Stripe's API and the IETF draft of that name): a POST whose
// key names a delivery of the channel still in the history, with the same
// body (SHA-256), is answered 200 {"id":N,"duplicate":true} with that
// delivery's id and is not relayed again; with a different body it gets
// 422. The key is relayed like any header. GitHub sends no such header, so
// its deliveries, and its redeliveries (which keep their X-GitHub-Delivery),
// are always relayed; POST /<channel>/redeliver/<id> is never a duplicate.
//
// # Storage
//
// The history of every channel is kept by a store, an interface internal to
// the package (store.go) with three implementations:
//
//   - in memory (the default; New, or Open without DataDir): lost when the
//     process ends; a POST is acknowledged once the delivery is in memory.
//   - in a bbolt file, Options.DataDir/relay.db (Open; hookline serve
//     --data-dir): every delivery is written in its own bbolt transaction,
//     which bbolt commits with two fdatasync calls (the data pages, then
//     the meta page that makes them current), before the POST is answered
//     200. Evictions are in the same transaction. A relay killed at any
//     moment (SIGKILL, power loss) restarts with every delivery it
//     acknowledged, with the same ids, and numbers on from the last one.
//     A POST that fails to store gets 503 with Retry-After and is relayed
//     to no one. The file is created 0600 (its directory 0700, and synced
//     once after creation) and locked: a second relay on the same directory
//     waits a second and fails with ErrDataDirInUse.
//   - in Redis, Options.RedisURL (Open; hookline serve --redis-url): see
//     "Several relays on one Redis" below.
//
// The first two apply the same limits with the same code (the ledger, in
// memory in both cases: ids, sizes and Idempotency-Keys of the retained
// deliveries),
// so bytes on disk are bounded as bytes in memory are: about
// TotalHistoryBytes plus bbolt's page overhead (bbolt reuses freed pages
// but never shrinks its file). On open, the file is read once to rebuild
// the ledger, channels ordered by their newest delivery, and trimmed to the
// limits if they were lowered; a record that does not decode (each carries
// a CRC-32C) is dropped with a warning, and left out of replays (a gap)
// until then. A bbolt store keeps no delivery in memory: replays and
// redeliveries read and decode records (a replay a page of at most 4 MiB at
// a time); live deliveries are fanned out from memory as before.
//
// A record is the delivery's received time, headers, raw query and exact
// body (see record.go), keyed by its id in a bucket per channel; the
// message is rebuilt from them, byte for byte the one sent before the
// restart. The file is not meant to be read by other programs.
//
// Why bbolt (go.etcd.io/bbolt): the relay needs a durable append-and-trim
// log per channel, in one process, with no server to run. bbolt is pure Go
// (no cgo: the release stays static and cross-compiled), one file, ACID
// with fsync on every commit, a file lock against a second writer, ordered
// keys (replay after an id is a cursor seek), and is maintained by the etcd
// project, which runs it in production. Considered and not taken: SQLite
// (cgo, or a pure-Go port far larger than bbolt), Pebble/Badger (LSM
// engines built for write volumes the relay does not have, with compaction
// and many files to manage), and a hand-written append-only log (its
// crash-recovery and compaction code would be ours to get right). fsync per
// POST caps one relay at a few hundred POSTs a second on ordinary disks,
// far above any webhook source; writes are serialised across channels.
//
// # Several relays on one Redis
//
// With Options.RedisURL the history is kept in Redis (7.0 or later), and
// any number of relays ("replicas") using the same Redis can serve one URL
// behind a load balancer; they keep no state of their own. docs/DEPLOY.md
// describes a deployment.
//
//   - Each channel's history is a Redis stream whose entry ids are
//     "<n>-0", n being the delivery's SSE id, with an index (sizes, times,
//     Idempotency-Keys). An append is one Lua script, atomic in Redis: it
//     gives the next id of the channel (ids grow per channel whichever
//     replica receives the POST, and stay the integers clients hold),
//     applies the limits exactly as the ledger does (XTRIM MINID to the
//     first id kept: exact, so that a history never holds more than its
//     limits), XADDs the record, and publishes it. The POST is answered 200
//     once Redis has run the script; how durable that is depends on
//     Redis's persistence (appendonly, appendfsync), see docs/DEPLOY.md.
//   - Deliveries reach every replica through Redis pub/sub: a replica
//     subscribes to a channel's feed while it has subscribers on it, and
//     gets each append's id, with the delivery when it is under 64 KiB
//     (larger ones are read from the stream). The stream stays the truth:
//     after every (re)subscription, and whenever ids skip, a replica reads
//     the stream from the last id its subscribers got, so a lost pub/sub
//     message delays a delivery but never loses it, and ids sort out
//     repeats. (XREAD BLOCK on the channels' streams was considered: one
//     blocking call names every stream each time and must be interrupted
//     whenever a channel gains or loses subscribers.)
//   - Last-Event-ID resumes from the stream on any replica: a client may
//     reconnect to another replica (its own died, or the load balancer
//     moved it) and loses nothing within the history.
//   - Idempotency-Keys, redeliveries and the limits are shared: a retry on
//     another replica is still a duplicate. Every replica should run with
//     the same limits (each append applies those of the replica that got
//     it). The total limit evicts across channels, so the store needs one
//     Redis primary (not Redis Cluster).
//   - When Redis does not answer: a POST gets 503 with Retry-After: 5 and
//     a message saying so (if the connection broke while the script was
//     sent, the message says the delivery may have been stored: retry with
//     the same Idempotency-Key); a new stream gets 503 (reconnect with the
//     same Last-Event-ID); /healthz answers 503 "redis unreachable". Open
//     streams stay open, with their pings: nothing can be delivered
//     meanwhile, and once Redis answers again each replica resubscribes
//     and sends its subscribers what they missed, in order. No restart is
//     needed; Open alone fails when Redis does not answer at startup
//     (ErrRedisUnavailable).
//   - A replica that dies ends its streams (their connections break);
//     clients reconnect, through the load balancer, to another replica with
//     Last-Event-ID. A POST it had not answered may or may not be stored:
//     senders retry, best with an Idempotency-Key.
//
// # Limits
//
//   - Bodies over Options.MaxBodyBytes (25 MiB, GitHub's limit) get 413, with
//     no body read when Content-Length announces it; exactly 25 MiB is fine.
//   - Serve's http.Server has ReadHeaderTimeout, ReadTimeout (for uploads),
//     a WriteTimeout for ordinary responses, IdleTimeout and MaxHeaderBytes.
//     Streams clear the read and write deadlines: they have no overall
//     timeout, but each event gets Options.WriteTimeout plus one second per
//     MiB, and a subscriber that cannot take it in that time is dropped.
//   - A channel accepts Options.MaxSubscribers streams; one more gets 429 with
//     Retry-After. While the relay shuts down, new streams get 503.
//   - Slow subscribers cannot grow memory: at most Options.SubscriberQueue
//     deliveries (1024), and at most Options.HistoryBytes of them, wait for
//     one subscriber (shared with the history, not copied; an idle
//     subscriber holds no queue). One more, and the subscriber is cut off:
//     its connection is closed at once, even in the middle of a blocked
//     write, and it resumes with Last-Event-ID from the history (smee-client
//     and browsers reconnect by themselves). Stats.CutOff counts them.
//   - Responses carry Cache-Control: no-cache (streams), X-Accel-Buffering: no
//     (so nginx does not buffer streams) and X-Content-Type-Options: nosniff.
//
// # Redelivery
//
// POST /<channel>/redeliver/<id> publishes a delivery still in the history
// again, with a new id and timestamp, and the headers, query and body the
// relay stored for it. Nothing of the redeliver request is used (headers,
// query, body), so it cannot inject or change a header; it needs only the
// channel name, like POST /<channel> itself. The redelivery is not marked:
// subscribers see the same message as the first time (GitHub's own
// redeliveries keep the X-GitHub-Delivery id too).
//
// # The page
//
// GET /<channel> from a browser shows the channel URL with a copy button and
// a live list of deliveries (event and action, delivery id, time, size), each
// expanding to its headers and pretty-printed payload, with a redeliver
// button. It is a static page with vanilla JavaScript embedded in the binary
// (no CDN, works offline), served with a Content-Security-Policy that allows
// only its own files; payloads are rendered as text. It subscribes with
// ?hookline=1&lastEventId=0, so it lists the retained history at once and
// renders exact bytes.
//
// # Shutdown
//
// When Serve's context ends, the listener closes, every stream ends cleanly
// (the response completes, so clients see EOF and reconnect later), requests
// in flight, such as a POST still uploading, finish (up to
// Options.ShutdownTimeout), and Serve returns nil.
package relay
