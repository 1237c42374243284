//go:build race

package testenv

// Race reports whether the test binary was built with the race detector.
// A test whose cost is the size of its data, not what runs concurrently
// (a 25 MiB event through a parser, say), takes a smaller size under it:
// the detector checks the same code paths at any size, and make check's
// Go-alone run, built without it, runs the test at full size.
const Race = true
