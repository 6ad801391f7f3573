package policy

import (
	"reflect"
	"testing"
)

func TestDecodeResult(t *testing.T) {
	five := int64(5)
	for _, tc := range []struct {
		name string
		out  string
		fast bool // read by hand, not by encoding/json
		want *verdict
	}{
		{"allowed", `[{"result":{"allow":true,"priority":[0],"deny":[]}}]`, true, &verdict{allow: true, priority: new(int64)}},
		{"denied, keys in any order", `[{"result":{"deny":[{"rule":"a","reason":"x"},{"reason":"y","rule":"b"}],"allow":false,"priority":[5]}}]`, true,
			&verdict{violations: []Violation{{Rule: "a", Reason: "x"}, {Rule: "b", Reason: "y"}}, priority: &five}},
		{"a usage rule waits", `[{"result":{"allow":false,"priority":[],"deny":[{"rule":"q","waits":true,"reason":"x"},{"waits":false,"rule":"r","reason":"y"}]}}]`, true,
			&verdict{violations: []Violation{{Rule: "q", Reason: "x", Waits: true}, {Rule: "r", Reason: "y"}}}},
		{"waits not a bool", `[{"result":{"allow":false,"priority":[],"deny":[{"rule":"q","waits":1,"reason":"x"}]}}]`, false,
			&verdict{violations: []Violation{{Rule: "q", Reason: "x"}}}},
		{"no priority", `[{"result":{"allow":true,"priority":[],"deny":[]}}]`, true, &verdict{allow: true}},
		{"non-ASCII reason", `[{"result":{"allow":false,"priority":[],"deny":[{"rule":"r","reason":"é ≥ 8 GB"}]}}]`, true,
			&verdict{violations: []Violation{{Rule: "r", Reason: "é ≥ 8 GB"}}}},
		{"escaped reason", `[{"result":{"allow":false,"priority":[],"deny":[{"rule":"r","reason":"say \"hi\"\n"}]}}]`, false,
			&verdict{violations: []Violation{{Rule: "r", Reason: "say \"hi\"\n"}}}},
		{"another key in a denial", `[{"result":{"allow":false,"priority":[],"deny":[{"rule":"r","reason":"x","node":"a"}]}}]`, false,
			&verdict{violations: []Violation{{Rule: "r", Reason: "x"}}}},
		{"a key differing in case", `[{"result":{"allow":false,"priority":[],"deny":[{"Rule":"r","reason":"x"}]}}]`, false,
			&verdict{violations: []Violation{{Rule: "", Reason: "x"}}}},
		{"reason not a string", `[{"result":{"allow":false,"priority":[],"deny":[{"rule":"r","reason":3}]}}]`, false,
			&verdict{violations: []Violation{{Rule: "r", Reason: ""}}}},
		{"fractional priority", `[{"result":{"allow":true,"priority":[1.5],"deny":[]}}]`, false, &verdict{allow: true}},
		{"priority too large", `[{"result":{"allow":true,"priority":[99999999999999999999],"deny":[]}}]`, false, &verdict{allow: true}},
		{"duplicate key", `[{"result":{"allow":false,"allow":true,"priority":[],"deny":[]}}]`, false, &verdict{allow: true}},
		{"undefined", `[]`, false, nil},
		{"trailing bytes", `[{"result":{"allow":true,"priority":[],"deny":[]}}]x`, false, &verdict{allow: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, fast := scanResult([]byte(tc.out))
			if fast != tc.fast {
				t.Fatalf("read by hand: %v, want %v", fast, tc.fast)
			}
			got, err := decodeResult([]byte(tc.out))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzDecodeResult: whatever the hand-written reader accepts, encoding/json
// reads the same.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`[{"result":{"allow":true,"priority":[0],"deny":[]}}]`,
		`[{"result":{"deny":[{"rule":"a","reason":"x"},{"reason":"y","rule":"b"}],"allow":false,"priority":[-5]}}]`,
		`[{"result":{"allow":false,"priority":[],"deny":[{"rule":"r","reason":"é"}]}}]`,
		`[{"result":{"allow":true,"priority":[01],"deny":[]}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		fast, ok := scanResult(out)
		if !ok {
			return
		}
		slow, err := genericResult(out)
		if err != nil {
			t.Fatalf("read by hand as %+v, but encoding/json: %v", fast, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("read by hand as %+v, by encoding/json as %+v", fast, slow)
		}
	})
}
