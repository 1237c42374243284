package bytesize

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1048576", 1 << 20},
		{"512KiB", 512 << 10},
		{"50mib", 50 << 20},
		{"1GiB", 1 << 30},
		{"2G", 2 << 30},
		{"64k", 64 << 10},
		{"50MB", 50_000_000},
		{"1 GB", 1_000_000_000},
		{"100B", 100},
	}
	for _, tt := range tests {
		if got, err := Parse(tt.in); err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "0", "1.5MiB", "10XB", "99999999999GiB"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", bad, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {512, "512 B"}, {4096, "4 KiB"}, {1536, "1.5 KiB"},
		{31457280, "30 MiB"}, {31457308, "30 MiB"}, {21_900_000, "21 MiB"}, {5 << 29, "2.5 GiB"},
	} {
		if got := Format(tt.n); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
