package procenv

import (
	"strings"
	"testing"
)

func TestLookupUser(t *testing.T) {
	for _, tc := range []struct {
		name    string
		uid     uint32
		wantErr string
	}{
		{"nobody", 65534, ""},
		{"65534", 65534, ""},
		{"424242", 424242, ""}, // no account: its own group
		{"root", 0, "is root"},
		{"0", 0, "is root"},
		{"no-such-user-here", 0, "unknown user"},
	} {
		u, err := LookupUser(tc.name)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || u.UID != tc.uid {
			t.Errorf("%s: %+v, %v; want uid %d", tc.name, u, err, tc.uid)
		}
	}
}
