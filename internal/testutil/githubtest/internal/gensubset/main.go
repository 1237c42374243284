// Command gensubset writes the part of GitHub's published REST API
// description that package githubtest serves: the webhook operations (a
// repository's and an organisation's hooks, a GitHub App's hook and its
// manifest conversion, GET /app) and every component they refer to, by
// $ref, transitively. The full description (npm @octokit/openapi, 13 MB, a
// node package) is the source; the subset (a few hundred KB, committed)
// lets the GitHub API tests run with Go alone.
//
//	go run ./internal/testutil/githubtest/internal/gensubset \
//	    -in interop/node_modules/@octokit/openapi/generated/api.github.com.json \
//	    -out internal/testutil/githubtest/testdata/api.github.com.json
//
// (go generate ./internal/testutil/githubtest runs exactly that.) The output
// records the package's version and the SHA-256 of the file it came from in
// "x-hookline-subset"; githubtest's TestSubsetIsCurrent regenerates it from
// the installed package and compares when the package is there.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hookline/hookline/internal/testutil/githubtest"
)

func main() {
	in := flag.String("in", "", "GitHub's description: api.github.com.json of @octokit/openapi")
	out := flag.String("out", "", "the subset to write")
	flag.Parse()
	if *in == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gensubset:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	full, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	// The package's version is in its package.json, two directories up
	// from generated/api.github.com.json.
	pkg, err := os.ReadFile(filepath.Join(filepath.Dir(in), "..", "package.json"))
	if err != nil {
		return err
	}
	subset, err := githubtest.Subset(full, pkg)
	if err != nil {
		return err
	}
	return os.WriteFile(out, subset, 0o644)
}
