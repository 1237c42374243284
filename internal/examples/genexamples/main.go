// Command genexamples writes octokit.json.gz, the examples package's copy
// of @octokit/webhooks-examples (MIT, the Octokit contributors): the
// first api.github.com example of every event and event.action, compact,
// gzipped. It is run by `go generate ./internal/examples/` once
// `make interop-deps` has installed the package pinned in interop/:
//
//	go run ./genexamples -in ../../interop/node_modules/@octokit/webhooks-examples -out octokit.json.gz
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	in := flag.String("in", "", "the @octokit/webhooks-examples package directory")
	out := flag.String("out", "octokit.json.gz", "file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genexamples:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	pkg, err := os.ReadFile(filepath.Join(in, "package.json"))
	if err != nil {
		return err
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(pkg, &meta); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(in, "api.github.com", "index.json"))
	if err != nil {
		return err
	}
	var events []struct {
		Name     string
		Examples []json.RawMessage
	}
	if err := json.Unmarshal(data, &events); err != nil {
		return err
	}
	// name -> payload; encoding/json writes map keys sorted, so the file
	// is the same for the same input.
	all := map[string]json.RawMessage{}
	for _, e := range events {
		for _, ex := range e.Examples {
			var head struct{ Action string }
			json.Unmarshal(ex, &head)
			name := e.Name
			if head.Action != "" {
				name += "." + head.Action
			}
			if _, ok := all[name]; ok {
				continue // the first example of a name
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, ex); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			all[name] = compact.Bytes()
		}
	}
	doc, err := json.Marshal(map[string]any{"version": meta.Version, "examples": all})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(doc)
	if err := zw.Close(); err != nil {
		return err
	}
	fmt.Printf("%d examples of @octokit/webhooks-examples %s, %d bytes (%d gzipped)\n", len(all), meta.Version, len(doc), buf.Len())
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
