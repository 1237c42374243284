// Command genpayload writes package webhooks/payload, and webhooks' event
// names (the one event table: constants and EmitterEventNames), from
// GitHub's webhooks description, the npm package @octokit/openapi-webhooks
// pinned in interop/ (`make interop-deps` installs it). It is run by `go
// generate ./webhooks/payload/`:
//
//	go run ../internal/payloadgen/cmd/genpayload -in ../../interop/node_modules/@octokit/openapi-webhooks/generated/api.github.com.json -out payload_gen.go -names ../eventnames_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hookline/hookline/webhooks/internal/payloadgen"
)

func main() {
	in := flag.String("in", "", "the description: api.github.com.json of @octokit/openapi-webhooks")
	out := flag.String("out", "payload_gen.go", "Go file to write")
	pkg := flag.String("pkg", "payload", "package name of the generated file")
	names := flag.String("names", "../eventnames_gen.go", "Go file of package webhooks to write the event names to")
	flag.Parse()
	if err := run(*in, *out, *pkg, *names); err != nil {
		fmt.Fprintln(os.Stderr, "genpayload:", err)
		os.Exit(1)
	}
}

func run(in, out, pkg, namesOut string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("%w (run make interop-deps first)", err)
	}
	source, err := payloadgen.Describe(in)
	if err != nil {
		return err
	}
	code, events, err := payloadgen.Generate(pkg, source, src)
	if err != nil {
		return err
	}
	names, err := payloadgen.GenerateEventNames("webhooks", source, events)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, code, 0o644); err != nil {
		return err
	}
	return os.WriteFile(namesOut, names, 0o644)
}
