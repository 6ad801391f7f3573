package pluginhost

import (
	"errors"
	"strings"
	"testing"
)

// TestMetadataNames: a plugin's name and version become parts of S3 keys
// and file names, so the upload refuses what would walk a path or break a
// line (names.Plugin, names.Version).
func TestMetadataNames(t *testing.T) {
	meta := func(name, version string) []byte {
		return []byte(strings.NewReplacer(`"name":"handmade"`, `"name":`+quote(name), `"version":"1"`, `"version":`+quote(version)).Replace(handmadeMeta))
	}
	if _, err := parseMetadata(meta("handmade", "1.2.0-rc.1"), DefaultLimits()); err != nil {
		t.Fatalf("a good version: %v", err)
	}
	for _, tc := range []struct{ name, version, field string }{
		{"handmade", "../../etc", "version"},
		{"handmade", "1\n2", "version"},
		{"handmade", "1\x002", "version"},
		{"handmade", "", "version"},
		{"../handmade", "1", "name"},
		{"hand made", "1", "name"},
	} {
		_, err := parseMetadata(meta(tc.name, tc.version), DefaultLimits())
		if !errors.Is(err, ErrMetadata) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("name %q version %q: %v, want ErrMetadata about %s", tc.name, tc.version, err, tc.field)
		}
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
