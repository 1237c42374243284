package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/joho/godotenv"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/atomicfile"
	"github.com/hookline/hookline/internal/githubapi"
	"github.com/hookline/hookline/internal/httpx"
)

// A GitHub App's credentials are its ID and a private key file: never the
// key itself in a flag (it would show in ps and shell history) or in a
// message. They come from --app-id and --app-key ($HOOKLINE_APP_ID,
// $HOOKLINE_APP_KEY_FILE, the config file), or from a Probot .env file
// (--app-env: APP_ID, PRIVATE_KEY or PRIVATE_KEY_PATH, WEBHOOK_SECRET),
// which is what `hookline app new` writes and what every Probot App
// already has.

// appFlagValues are what the App's flags hold.
type appFlagValues struct {
	app                  bool
	id, keyFile, envFile string
}

func appFlags(usage string, v *appFlagValues) []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "app", Usage: usage, Destination: &v.app},
		&ucli.StringFlag{Name: "app-id", Usage: "the GitHub App's `ID` (or client ID), from its settings", EnvVars: []string{"HOOKLINE_APP_ID"}, Destination: &v.id},
		&ucli.StringFlag{Name: "app-key", Usage: "the GitHub App's private key `FILE` (.pem, from its settings, Private keys)", EnvVars: []string{"HOOKLINE_APP_KEY_FILE"}, TakesFile: true, Destination: &v.keyFile},
		&ucli.StringFlag{Name: "app-env", Usage: "read the App's APP_ID, PRIVATE_KEY (or PRIVATE_KEY_PATH) and WEBHOOK_SECRET from `FILE`, a Probot .env (hookline app new writes one)", TakesFile: true, Destination: &v.envFile},
	}
}

// appCredentials are the App of --app: what signs its tokens, and the
// webhook secret of --app-env's WEBHOOK_SECRET, if any.
type appCredentials struct {
	app        *githubapi.App
	secret     string
	secretFrom string // where secret came from, for messages
}

// parse reads the App's credentials when --app is given.
func (v *appFlagValues) parse(c *ucli.Context) (appCredentials, error) {
	var cr appCredentials
	if !v.app {
		if c.IsSet("app-env") {
			return cr, usageErrorf("--app-env names a GitHub App: add --app to use its webhook")
		}
		return cr, nil
	}
	id, keyFile := v.id, v.keyFile
	var inlineKey string
	if v.envFile != "" {
		env, err := godotenv.Read(v.envFile)
		if err != nil {
			return cr, usageErrorf("--app-env %s: %v", v.envFile, err)
		}
		if id == "" || !c.IsSet("app-id") {
			id = firstNonEmpty(env["APP_ID"], id)
		}
		switch {
		case c.IsSet("app-key"):
		case env["PRIVATE_KEY"] != "":
			inlineKey, keyFile = env["PRIVATE_KEY"], ""
		case env["PRIVATE_KEY_PATH"] != "":
			keyFile = env["PRIVATE_KEY_PATH"]
			if !filepath.IsAbs(keyFile) {
				keyFile = filepath.Join(filepath.Dir(v.envFile), keyFile)
			}
		}
		if s := env["WEBHOOK_SECRET"]; s != "" {
			cr.secret, cr.secretFrom = s, "WEBHOOK_SECRET in "+v.envFile
		}
	}
	if id == "" || (keyFile == "" && inlineKey == "") {
		return cr, usageErrorf("--app needs the App's ID and private key: --app-id ID --app-key FILE.pem (or $HOOKLINE_APP_ID and $HOOKLINE_APP_KEY_FILE), or --app-env .env (hookline app new writes one)")
	}
	if strings.ContainsAny(id, " \t/") {
		return cr, usageErrorf("--app-id %q: want the App's ID (a number, such as 123456) or its client ID (Iv23li…)", id)
	}
	pem := []byte(inlineKey)
	if keyFile != "" {
		var err error
		if pem, err = os.ReadFile(keyFile); err != nil {
			return cr, usageErrorf("--app-key: %v", err)
		}
	}
	key, err := githubapi.ParseKey(pem)
	if err != nil {
		where := keyFile
		if where == "" {
			where = "PRIVATE_KEY in " + v.envFile
		}
		return cr, usageErrorf("%s: %v", where, err)
	}
	cr.app = &githubapi.App{ID: id, Key: key}
	return cr, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// appRecord is what forward --app writes in the state directory before it
// points the App's webhook at its channel, and removes once it has put the
// webhook back: after a crash, the next run finds it and puts back the
// URL from before, not the dead channel's.
type appRecord struct {
	AppID    string               `json:"app_id"`
	API      string               `json:"api"`
	Channel  string               `json:"channel"`
	Previous githubapi.HookConfig `json:"previous"`
	PID      int                  `json:"pid"`
	Started  time.Time            `json:"started"`
}

// recordPath is the record's file for the App on api.
func (cr appCredentials) recordPath(api string) (string, error) {
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "app-hook-"+stateFileName(api+"#"+cr.app.ID)), nil
}

// running reports whether process pid is alive (a record of a forward
// still running, not of a crashed one).
func running(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// point points the App's webhook at channel (with secret, unless empty)
// and returns what puts it back when forward ends.
func (cr appCredentials) point(ctx context.Context, access githubAccess, channel, secret, api string, keep bool, s *streams) (func(), error) {
	gh, now := access.gh, access.appConfig
	path, err := cr.recordPath(api)
	if err != nil {
		return nil, fmt.Errorf("the state directory, for the App's record: %w", err)
	}
	previous := githubapi.HookConfig{URL: now.URL, ContentType: now.ContentType, InsecureSSL: now.InsecureSSL}
	var old []byte
	if b, err := os.ReadFile(path); err == nil {
		old = b
		var rec appRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s: %v (delete it once the App's webhook URL is right in its settings)", path, err)
		}
		switch {
		case running(rec.PID):
			return nil, fmt.Errorf("another hookline forward (pid %d, since %s) has the App's webhook pointed at %s: stop it first (if that process is not hookline, delete %s)",
				rec.PID, rec.Started.Local().Format(time.DateTime), httpx.RedactURL(rec.Channel), path)
		case now.URL == rec.Channel:
			previous = rec.Previous
			fmt.Fprintf(s.err, "an earlier forward (pid %d, started %s) ended without putting the App's webhook back: it pointed at %s; this run takes it over and puts back %s when it ends\n",
				rec.PID, rec.Started.Local().Format(time.DateTime), httpx.RedactURL(rec.Channel), httpx.RedactURL(rec.Previous.URL))
		default:
			fmt.Fprintf(s.err, "an earlier forward's record (%s) is out of date: the App's webhook was changed since, to %s, which this run puts back when it ends\n", path, httpx.RedactURL(now.URL))
		}
	}
	if previous.URL == channel {
		fmt.Fprintf(s.err, "the App's webhook already points at %s: it stays so when forward ends\n", httpx.RedactURL(channel))
		keep = true
	}
	rec, _ := json.MarshalIndent(appRecord{AppID: cr.app.ID, API: api, Channel: channel, Previous: previous, PID: os.Getpid(), Started: time.Now()}, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, rec, 0o600); err != nil {
		return nil, fmt.Errorf("writing the App's record (so that a crash cannot leave the App pointed at a dead channel): %w", err)
	}
	undoRecord := func() {
		if old != nil {
			atomicfile.Write(path, old, 0o600)
		} else {
			os.Remove(path)
		}
	}
	if _, err := gh.UpdateAppHookConfig(ctx, githubapi.HookConfig{URL: channel, ContentType: "json", Secret: secret}); err != nil {
		undoRecord()
		return nil, err
	}
	fmt.Fprintf(s.err, "pointed the GitHub App's webhook at %s (it was %s; put back when forward ends)\n", httpx.RedactURL(channel), httpx.RedactURL(previous.URL))
	return func() {
		if keep {
			os.Remove(path)
			if previous.URL != channel {
				fmt.Fprintf(s.err, "kept the GitHub App's webhook pointed at %s (--keep-hook)\n", httpx.RedactURL(channel))
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		back := previous
		back.Secret = ""
		if back.ContentType == "" {
			back.ContentType = "json"
		}
		if back.URL == "" {
			fmt.Fprintf(s.err, "the GitHub App had no webhook URL before; GitHub's API cannot empty it, so it still points at %s: change it in the App's settings\n", httpx.RedactURL(channel))
			os.Remove(path)
			return
		}
		if _, err := gh.UpdateAppHookConfig(ctx, back); err != nil {
			fmt.Fprintf(s.err, "could not put the GitHub App's webhook back to %s (%v): the next forward --app does it, or set it in the App's settings\n", httpx.RedactURL(back.URL), err)
			return
		}
		os.Remove(path)
		msg := fmt.Sprintf("put the GitHub App's webhook back to %s", httpx.RedactURL(back.URL))
		if secret != "" {
			msg += " (its secret stays the one this run set: GitHub never returns a secret, so the one before could not be read to put back)"
		}
		fmt.Fprintln(s.err, msg)
	}, nil
}
