//go:build !unix

package testenv

// lockDir does not lock where flock is missing: two packages' tests that
// start at once may both build the shared binary, each into its own
// partial file, and one replaces the other's.
func lockDir(string) (func(), error) { return func() {}, nil }
