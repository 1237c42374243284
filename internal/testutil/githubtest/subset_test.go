package githubtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// TestSubsetIsCurrent regenerates the committed subset from the pinned npm
// package, when it is installed, and compares: a new pin in
// interop/package.json without `go generate ./internal/testutil/githubtest`
// fails here.
func TestSubsetIsCurrent(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := testenv.NodePackage(t, "@octokit/openapi")
	full, err := os.ReadFile(filepath.Join(dir, "generated", "api.github.com.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Subset(full, pkg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(subsetFile)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the subset of the installed @octokit/openapi; run `go generate ./internal/testutil/githubtest`", subsetFile)
	}
}

// TestSubsetRefusesDanglingRefs: a description that names a component it
// does not hold is an error, not a subset the router would fail on later.
func TestSubsetRefusesDanglingRefs(t *testing.T) {
	full := []byte(`{"openapi":"3.0.3","paths":{"/repos/{owner}/{repo}/hooks":{"get":{"responses":{"200":{"$ref":"#/components/responses/missing"}}}}},"components":{"schemas":{}}}`)
	_, err := Subset(full, []byte(`{"name":"@octokit/openapi","version":"1.0.0"}`))
	if err == nil {
		t.Fatal("Subset accepted a $ref to a component that does not exist")
	}
}
