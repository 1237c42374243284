// Package apicheck checks that the rest module uses no standard-library API
// newer than Go 1.14, the go line of its go.mod: the compiler enforces the
// language version, not the library's. It reads the API lists that every Go
// installation carries ($GOROOT/api/go1.N.txt) and the rest module's uses,
// type-checked with go/types.
package apicheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxMinor is the newest Go 1.x whose API the rest module may use.
const maxMinor = 14

// restPackages are the rest module's packages (directories under rest/).
var restPackages = []string{"", "header", "backoff"}

// apiKey names one API feature: its package, kind (func, method, field,
// type, const, var), owner type (for methods and fields) and name.
type apiKey struct{ pkg, kind, owner, name string }

var (
	lineRE   = regexp.MustCompile(`^pkg ([^ ,]+)(?: \([^)]*\))?, (.*)$`)
	funcRE   = regexp.MustCompile(`^func (\w+)[\[(]`)
	methodRE = regexp.MustCompile(`^method \(\*?(\w+)(?:\[[^\]]*\])?\) (\w+)\(`)
	fieldRE  = regexp.MustCompile(`^type (\w+) struct, (?:embedded \*?)?(\w+)`)
	ifaceRE  = regexp.MustCompile(`^type (\w+) interface, (\w+)\(`)
	typeRE   = regexp.MustCompile(`^type (\w+)`)
	valueRE  = regexp.MustCompile(`^(const|var) (\w+)`)
)

// parseAPI returns the Go 1.x minor version that introduced each feature
// of the packages pkgs listed in dir's go1*.txt files (go1.txt is 0).
func parseAPI(t *testing.T, dir string, pkgs map[string]bool) map[apiKey]int {
	files, err := filepath.Glob(filepath.Join(dir, "go1*.txt"))
	if err != nil || len(files) < maxMinor {
		t.Fatalf("no Go API lists in %s (%v)", dir, err)
	}
	since := map[apiKey]int{}
	for _, f := range files {
		minor := 0
		if m := regexp.MustCompile(`go1\.(\d+)\.txt$`).FindStringSubmatch(f); m != nil {
			minor, _ = strconv.Atoi(m[1])
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// Only the lines of the packages asked about go through the
			// regular expressions: they are 40,000 lines.
			line := sc.Text()
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "pkg "), ",")
			name, _, _ = strings.Cut(name, " ")
			if !pkgs[name] {
				continue
			}
			m := lineRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			pkg, rest := m[1], m[2]
			var k apiKey
			if mm := funcRE.FindStringSubmatch(rest); mm != nil {
				k = apiKey{pkg, "func", "", mm[1]}
			} else if mm := methodRE.FindStringSubmatch(rest); mm != nil {
				k = apiKey{pkg, "method", mm[1], mm[2]}
			} else if mm := fieldRE.FindStringSubmatch(rest); mm != nil {
				k = apiKey{pkg, "field", mm[1], mm[2]}
			} else if mm := ifaceRE.FindStringSubmatch(rest); mm != nil {
				k = apiKey{pkg, "method", mm[1], mm[2]}
			} else if mm := typeRE.FindStringSubmatch(rest); mm != nil {
				k = apiKey{pkg, "type", "", mm[1]}
			} else if mm := valueRE.FindStringSubmatch(rest); mm != nil {
				k = apiKey{pkg, mm[1], "", mm[2]}
			} else {
				continue
			}
			if v, ok := since[k]; !ok || minor < v {
				since[k] = minor
			}
		}
		fh.Close()
	}
	return since
}

// keyOf returns the API feature obj is, if it is a standard library one.
func keyOf(obj types.Object) (apiKey, bool) {
	if obj == nil || obj.Pkg() == nil || !obj.Exported() {
		return apiKey{}, false
	}
	pkg := obj.Pkg().Path()
	if first, _, _ := strings.Cut(pkg, "/"); strings.Contains(first, ".") {
		return apiKey{}, false // not the standard library
	}
	switch o := obj.(type) {
	case *types.Func:
		sig := o.Type().(*types.Signature)
		if sig.Recv() == nil {
			return apiKey{pkg, "func", "", o.Name()}, true
		}
		recv := sig.Recv().Type()
		if p, ok := recv.(*types.Pointer); ok {
			recv = p.Elem()
		}
		if n, ok := recv.(*types.Named); ok {
			return apiKey{pkg, "method", n.Obj().Name(), o.Name()}, true
		}
		if n, ok := types.Unalias(recv).(*types.Named); ok {
			return apiKey{pkg, "method", n.Obj().Name(), o.Name()}, true
		}
	case *types.TypeName:
		return apiKey{pkg, "type", "", o.Name()}, true
	case *types.Const:
		return apiKey{pkg, "const", "", o.Name()}, true
	case *types.Var:
		if !o.IsField() {
			return apiKey{pkg, "var", "", o.Name()}, true
		}
		// The struct type declaring the field, among its package's types.
		scope := o.Pkg().Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok {
				continue
			}
			if st, ok := tn.Type().Underlying().(*types.Struct); ok {
				for i := 0; i < st.NumFields(); i++ {
					if st.Field(i) == o {
						return apiKey{pkg, "field", tn.Name(), o.Name()}, true
					}
				}
			}
		}
	}
	return apiKey{}, false
}

func TestRestUsesGo114API(t *testing.T) {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	// rest's uses of the standard library, type-checked.
	type use struct {
		pos token.Pos
		key apiKey
	}
	var uses []use
	fset := token.NewFileSet()
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", exportData(t))}
	for _, dir := range restPackages {
		path := filepath.Join("..", "..", dir)
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var asts []*ast.File
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			asts = append(asts, af)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
		if _, err := conf.Check("github.com/hookline/hookline/rest/"+dir, fset, asts, info); err != nil {
			t.Fatalf("type-checking rest/%s: %v", dir, err)
		}
		for id, obj := range info.Uses {
			if k, ok := keyOf(obj); ok {
				uses = append(uses, use{id.Pos(), k})
			}
		}
	}
	if len(uses) < 50 {
		t.Errorf("only %d uses of the standard library found in rest: the check is not looking", len(uses))
	}

	// The check must be able to fail: features rest could be tempted by.
	tempting := []apiKey{{"io", "var", "", "Discard"}, {"net/http", "type", "", "MaxBytesError"}, {"net/http", "field", "Request", "Pattern"}, {"net/http", "method", "Request", "PathValue"}, {"strings", "func", "", "Cut"}}
	pkgs := map[string]bool{}
	for _, k := range tempting {
		pkgs[k.pkg] = true
	}
	for _, u := range uses {
		pkgs[u.key.pkg] = true
	}
	since := parseAPI(t, filepath.Join(strings.TrimSpace(string(goroot)), "api"), pkgs)
	for _, k := range tempting {
		if since[k] <= maxMinor {
			t.Errorf("the API lists say %v came in Go 1.%d; the parser is wrong", k, since[k])
		}
	}
	for _, u := range uses {
		k := u.key
		if v, known := since[k]; known && v > maxMinor {
			name := k.pkg + "." + k.name
			if k.owner != "" {
				name = k.pkg + "." + k.owner + "." + k.name
			}
			t.Errorf("%s: uses %s (%s), which came in Go 1.%d; rest's go.mod says go 1.%d", fset.Position(u.pos), name, k.kind, v, maxMinor)
		}
	}
	t.Logf("%d uses of the standard library checked against Go 1.%d's API", len(uses), maxMinor)
}

// exportData returns a lookup of the compiled export data of the rest
// module's dependencies (go list -export), for the gc importer: what the
// build cache has already (make check compiles them for go vet), where
// type-checking the standard library from source took 20 s of CPU at
// every run. Without cgo: the API is the same, the build the one make
// check shares, and a machine without a C compiler (Go alone) has no other.
func exportData(t *testing.T) func(path string) (io.ReadCloser, error) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok {
			files[path] = file
		}
	}
	return func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s in go list -export", path)
		}
		return os.Open(file)
	}
}
