package jsonscan_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/hookline/hookline/internal/jsonscan"
)

// BenchmarkString decodes a 20 MiB body's bodyB literal (base64, no
// escapes: the value aliases its input):
//
//	go test -run '^$' -bench String -count 6 ./internal/jsonscan/
func BenchmarkString(b *testing.B) {
	lit := []byte(`"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("hookline"), 20<<20/8)) + `"`)
	b.SetBytes(int64(len(lit)))
	for b.Loop() {
		if _, ok := jsonscan.String(lit); !ok {
			b.Fatal("not a string")
		}
	}
}
