// Package bytesize reads and writes sizes in bytes the way people type
// and read them: 50MiB, 512KiB, 1GiB, 50MB; "30 MiB" rather than 31457280.
// It is hookline's one size syntax, for serve's limits, the benchmark
// harness's payload sizes and every message that states a size.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a size such as 1048576, 512KiB, 50MiB, 1GiB (binary units,
// also written K, M, G) or 50MB (decimal units). A size is at least one
// byte.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size; write it like 50MiB or 1048576", s)
	}
	mult, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown unit; use B, KiB, MiB, GiB (or KB, MB, GB)", s)
	}
	if n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q must be more than 0 and less than 4 EiB", s)
	}
	return n * mult, nil
}

var units = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
}

// Format writes n in the largest binary unit it reaches: "512 B",
// "4 KiB", "30 MiB" for exact multiples, else one decimal below 10 of the
// unit ("1.5 MiB") and none above ("21 MiB").
func Format(n int64) string {
	unit, name := int64(1), "B"
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size || -n >= u.size {
			unit, name = u.size, u.name
			break
		}
	}
	switch v := float64(n) / float64(unit); {
	case n%unit == 0:
		return strconv.FormatInt(n/unit, 10) + " " + name
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.0f %s", v, name)
	default:
		return fmt.Sprintf("%.1f %s", v, name)
	}
}
