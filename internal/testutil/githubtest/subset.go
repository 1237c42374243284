package githubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

//go:generate go run ./internal/gensubset -in ../../../interop/node_modules/@octokit/openapi/generated/api.github.com.json -out testdata/api.github.com.json

// servedPath reports whether the server serves the description's path: the
// webhook operations and what a GitHub App's own hook needs. Keeping only
// those also leaves out paths kin-openapi's router calls conflicting
// (/orgs/{org}/attestations/{subject_digest} and .../{attestation_id}).
func servedPath(path string) bool {
	return strings.Contains(path, "/hooks") || path == "/app" || strings.HasPrefix(path, "/app/hook") || strings.HasPrefix(path, "/app-manifests/")
}

// Subset returns the part of GitHub's description (full, with the npm
// package's package.json for its version) that the server serves: the
// served paths and the components they refer to, transitively. The result
// is deterministic (keys sorted, two-space indent) and names its source in
// "x-hookline-subset".
func Subset(full, packageJSON []byte) ([]byte, error) {
	var pkg struct{ Name, Version string }
	if err := json.Unmarshal(packageJSON, &pkg); err != nil {
		return nil, fmt.Errorf("package.json: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(full, &doc); err != nil {
		return nil, fmt.Errorf("the description: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	components, _ := doc["components"].(map[string]any)
	if paths == nil || components == nil {
		return nil, fmt.Errorf("the description has no paths or no components")
	}
	keptPaths := map[string]any{}
	for p, item := range paths {
		if servedPath(p) {
			keptPaths[p] = item
		}
	}
	if len(keptPaths) == 0 {
		return nil, fmt.Errorf("the description has none of the webhook paths")
	}
	// Follow every $ref from the kept paths until nothing new is named.
	kept := map[string]map[string]any{}
	queue := refs(keptPaths, nil)
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		if !ok || !strings.HasPrefix(ref, "#/components/") {
			return nil, fmt.Errorf("a $ref outside the components: %q", ref)
		}
		if kept[kind] != nil && kept[kind][name] != nil {
			continue
		}
		section, _ := components[kind].(map[string]any)
		v, found := section[name]
		if !found {
			return nil, fmt.Errorf("%s: no such component", ref)
		}
		if kept[kind] == nil {
			kept[kind] = map[string]any{}
		}
		kept[kind][name] = v
		queue = refs(v, queue)
	}
	out := map[string]any{
		"openapi":    doc["openapi"],
		"info":       doc["info"],
		"servers":    doc["servers"],
		"paths":      keptPaths,
		"components": kept,
		"x-hookline-subset": map[string]any{
			"package": pkg.Name + "@" + pkg.Version,
			"file":    "generated/api.github.com.json",
			"sha256":  sha256Hex(full),
			"by":      "go generate ./internal/testutil/githubtest",
		},
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// refs appends to list every "$ref" value in v, in a stable order.
func refs(v any, list []string) []string {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["$ref"].(string); ok {
			list = append(list, r)
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			list = refs(v[k], list)
		}
	case []any:
		for _, e := range v {
			list = refs(e, list)
		}
	}
	return list
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
