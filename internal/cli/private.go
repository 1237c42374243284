package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookline/hookline/internal/atomicfile"
	"github.com/hookline/hookline/internal/httpx"
)

// Private channels of a hookline relay (serve, GET /new?private=1): the
// read token forward sends as Authorization: Bearer.
//
// forward --new --private writes the token /new gave into the state
// directory (tokens/<hash of the channel URL>, mode 0600) and never prints
// it: it is a credential, and the trace may be pasted into an issue. A
// later forward --url finds it there; on another machine it comes from
// $HOOKLINE_CHANNEL_TOKEN or ?token= in --url (which forward takes out of
// the URL and sends as the header).

// tokenEnv is the environment variable of a private channel's read token.
const tokenEnv = "HOOKLINE_CHANNEL_TOKEN"

// tokenFile returns where the read token of channel is kept.
func tokenFile(channel string) (string, error) {
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "tokens", strings.TrimSuffix(stateFileName(channel), ".json")), nil
}

// keepToken writes channel's token into the state directory and returns
// the file's path.
func keepToken(channel, token string) (string, error) {
	path, err := tokenFile(channel)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, atomicfile.Write(path, []byte(token+"\n"), 0o600)
}

// findToken returns the read token for channel: the one in its URL, else
// $HOOKLINE_CHANNEL_TOKEN, else the one an earlier forward --new --private
// kept; "" for none (a public channel).
func findToken(channel, inURL string) string {
	if inURL != "" {
		return inURL
	}
	if t := strings.TrimSpace(os.Getenv(tokenEnv)); t != "" {
		return t
	}
	if path, err := tokenFile(channel); err == nil {
		if b, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// createPrivateChannel asks a hookline relay for a private channel:
// GET /new?private=1, answered {"url","token"}. err is a request that
// failed (the caller words it as for any channel); refusal says why an
// answer gave no private channel.
func createPrivateChannel(ctx context.Context, client *http.Client, newURL string) (channel, token, refusal string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, newURL+"?private=1", nil)
	if err != nil {
		return "", "", "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var answer struct{ URL, Token, Error string }
	jerr := json.Unmarshal(body, &answer)
	switch {
	case resp.StatusCode != http.StatusOK && answer.Error != "":
		return "", "", fmt.Sprintf("the relay answered %s: %s", resp.Status, answer.Error), nil
	case resp.StatusCode != http.StatusOK || jerr != nil || answer.Token == "" || answer.URL == "":
		return "", "", fmt.Sprintf("the relay answered %s without a private channel: private channels are a hookline relay's (hookline serve), not smee.io's or gosmee's", resp.Status), nil
	}
	if _, err := httpx.ParseHTTPURL(answer.URL); err != nil {
		return "", "", fmt.Sprintf("the relay answered a channel URL that is not one: %v", err), nil
	}
	return answer.URL, answer.Token, "", nil
}

// bindChannel binds a private channel on the relay (PUT <channel>/<path>,
// path "secret" or "verify-token") to value, for the forward flag that
// asks for it: from then on the relay keeps only deliveries signed with
// the secret (--verify-on-relay), or answers a hub's handshake that
// carries the verify token (--hub-verify-token).
func bindChannel(ctx context.Context, transport http.RoundTripper, channel, token, path, flag, value string) error {
	if token == "" {
		return usageErrorf("%s binds a private channel, and %s is not one this machine has the read token of (forward --new --private makes one; elsewhere give %s)", flag, httpx.RedactURL(channel), tokenEnv)
	}
	ctx, cancel := context.WithTimeout(ctx, newChannelTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(channel, "/")+"/"+path, strings.NewReader(value))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s", flag, httpx.RedactText(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = "is it a hookline relay? Only hookline serve binds a channel"
		}
		return fmt.Errorf("%s: the relay answered %s: %s", flag, resp.Status, e.Error)
	}
	return nil
}
