// Package nearest finds the name a typo meant: the one of a list nearest
// to what was typed by edit distance (Levenshtein). The CLI's "did you
// mean", the event patterns (internal/eventmatch) and a payload path's
// member (webhooks/webhookstest) use it. It imports only the standard
// library, so that package webhooks and its test support may.
package nearest

// Name returns the name of names (of two letters or more) nearest to typed
// by edit distance, when at most within edits away; "" otherwise. A
// negative within has no bound.
func Name(typed string, names []string, within int) string {
	best, bestD := "", within+1
	for _, n := range names {
		if d := distance(typed, n); (within < 0 && best == "" || d < bestD) && len(n) > 1 {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
