package relay

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/hookline/hookline/internal/httpx"
)

// The page and its assets are embedded: the relay works offline and loads
// nothing from elsewhere (the CSP below forbids it).
//
//go:embed assets
var assetFS embed.FS

type asset struct {
	data  []byte
	ctype string
	etag  string
}

// assets holds them by name, read and hashed for their ETags the first
// time a page or asset is served: not at every start of every hookline
// command (forward, send) that links the relay and never serves a page.
var assets = sync.OnceValue(loadAssets)

func loadAssets() map[string]asset {
	types := map[string]string{
		".html": "text/html; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".svg":  "image/svg+xml",
	}
	m := map[string]asset{}
	entries, err := fs.ReadDir(assetFS, "assets")
	if err != nil {
		panic("relay: embedded assets: " + err.Error())
	}
	for _, e := range entries {
		data, err := assetFS.ReadFile("assets/" + e.Name())
		if err != nil {
			panic("relay: embedded assets: " + err.Error())
		}
		sum := sha256.Sum256(data)
		m[e.Name()] = asset{data: data, ctype: types[path.Ext(e.Name())], etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return m
}

// pageCSP allows the page its own script, style and stream only: payloads
// it shows are untrusted, and it renders them as text.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func writeAsset(w http.ResponseWriter, r *http.Request, name string, a asset) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
}

// servePage serves an HTML page of the relay.
func servePage(w http.ResponseWriter, r *http.Request, name string) {
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Referrer-Policy", "no-referrer") // a channel URL is a secret
	h.Set("X-Frame-Options", "DENY")
	writeAsset(w, r, name, assets()[name])
}

// serveAsset serves /assets/<name>: the page's script, style and icon.
func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := assets()[name]
	if !ok || path.Ext(name) == ".html" {
		httpx.WriteError(w, http.StatusNotFound, "no asset "+truncate(name, 64))
		return
	}
	writeAsset(w, r, name, a)
}
