package httpx

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// WriteJSON answers code with v as JSON (one line), its Content-Length,
// and nosniff. v is made of plain values: encoding it cannot fail.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// WriteError answers code with {"error": msg}, not to be cached.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, code, map[string]string{"error": msg})
}
