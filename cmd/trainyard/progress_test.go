package main

import "testing"

func TestProgressBar(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		want        string
	}{
		{0, 1 << 20, "up [>         ]   0%  0 B/1.0 MiB"},
		{1 << 19, 1 << 20, "up [=====>    ]  50%  512.0 KiB/1.0 MiB"},
		{1 << 20, 1 << 20, "up [==========] 100%  1.0 MiB/1.0 MiB"},
		{5, 0, "up [==========] 100%  5 B/0 B"},
	} {
		if got := progressBar("up", tc.done, tc.total, 10, bytesOf); got != tc.want {
			t.Errorf("progressBar(%d, %d) = %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
}
