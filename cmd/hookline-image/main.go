// Command hookline-image builds hookline's container image as an OCI image
// layout (package internal/ociimage says what is in it, and why no Docker
// daemon or base image is needed):
//
//	CGO_ENABLED=0 go build -o dist/hookline . && go run ./cmd/hookline-image -binary dist/hookline -out dist/image
//
// The layout is pushed with any OCI tool (skopeo copy oci:dist/image:VERSION
// docker://REGISTRY/hookline:VERSION), or run after umoci unpack.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/hookline/hookline/internal/ociimage"
)

func main() {
	binary := flag.String("binary", "", "the static hookline binary (CGO_ENABLED=0)")
	out := flag.String("out", "dist/image", "the OCI layout directory to write")
	arch := flag.String("arch", runtime.GOARCH, "the binary's architecture")
	version := flag.String("version", "dev", "the image's tag")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "hookline-image: give -binary PATH, a hookline built with CGO_ENABLED=0")
		os.Exit(2)
	}
	if err := os.RemoveAll(*out); err != nil {
		fmt.Fprintln(os.Stderr, "hookline-image:", err)
		os.Exit(1)
	}
	if err := ociimage.Build(*out, *binary, *arch, *version); err != nil {
		fmt.Fprintln(os.Stderr, "hookline-image:", err)
		os.Exit(1)
	}
	fmt.Printf("hookline-image: %s (OCI layout, tag %s)\n", *out, *version)
}
