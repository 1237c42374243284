// Command geneventnames writes the Go file holding webhooks.EmitterEventNames
// from the checked-in event list. It is run by `go generate ./webhooks/`:
//
//	go run ./internal/eventnames/cmd/geneventnames -in internal/eventnames/events.txt -out eventnames_gen.go
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hookline/hookline/webhooks/internal/eventnames"
)

func main() {
	in := flag.String("in", "internal/eventnames/events.txt", "event list to read")
	out := flag.String("out", "eventnames_gen.go", "Go file to write")
	pkg := flag.String("pkg", "webhooks", "package name of the generated file")
	flag.Parse()
	if err := run(*in, *out, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "geneventnames:", err)
		os.Exit(1)
	}
}

func run(in, out, pkg string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	code, err := eventnames.Generate(pkg, filepath.ToSlash(in), src)
	if err != nil {
		return err
	}
	return os.WriteFile(out, code, 0o644)
}
