package webhooks

// The request headers of a GitHub webhook delivery, as GitHub spells them
// (http.Header's Get and Set canonicalize them). Event.Header holds them
// all, and the rest of the request's.
const (
	HeaderEvent        = "X-GitHub-Event"                         // the event name, such as "issues"
	HeaderDelivery     = "X-GitHub-Delivery"                      // the delivery's GUID, the same on every redelivery
	HeaderSignature256 = "X-Hub-Signature-256"                    // "sha256=" and the HMAC-SHA256 of the body
	HeaderSignature    = "X-Hub-Signature"                        // "sha1=" and the HMAC-SHA1 of the body (legacy)
	HeaderHookID       = "X-GitHub-Hook-ID"                       // the webhook's id
	HeaderTargetID     = "X-GitHub-Hook-Installation-Target-ID"   // the id of the repository, organization, app... the hook is on
	HeaderTargetType   = "X-GitHub-Hook-Installation-Target-Type" // its type: "repository", "organization", "integration"...
)
