//go:build !unix

package relay

func defaultMaxStreams() int { return fallbackMaxStreams }
