package pluginhost

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// An env's action mask sits at the end of a flat observation, one value
// per discrete action; metadata that could not hold one is refused.
func TestMetadataActionMask(t *testing.T) {
	for name, tc := range map[string]struct {
		obs, act string
		ok       bool
	}{
		"fits":        {`{"kind":"box","shape":[6],"low":[0,0,0,0,0,0],"high":[1,1,1,1,1,1]}`, `{"kind":"discrete","n":5}`, true},
		"exactly":     {`{"kind":"box","shape":[2],"low":[0,0],"high":[1,1]}`, `{"kind":"discrete","n":2}`, true},
		"too narrow":  {`{"kind":"box","shape":[2],"low":[0,0],"high":[1,1]}`, `{"kind":"discrete","n":5}`, false},
		"not flat":    {`{"kind":"box","shape":[2,3],"low":[0,0,0,0,0,0],"high":[1,1,1,1,1,1]}`, `{"kind":"discrete","n":2}`, false},
		"box actions": {`{"kind":"box","shape":[6],"low":[0,0,0,0,0,0],"high":[1,1,1,1,1,1]}`, `{"kind":"box","shape":[1],"low":[-1],"high":[1]}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			meta := map[string]any{"abi_version": ABIVersion, "name": "masked", "version": "1", "kind": "env",
				"observation_space": json.RawMessage(tc.obs), "action_space": json.RawMessage(tc.act), "action_mask": true}
			b, _ := json.Marshal(meta)
			m, err := parseMetadata(b, DefaultLimits())
			switch {
			case tc.ok && err != nil:
				t.Fatal(err)
			case tc.ok && !m.Spec().ActionMask:
				t.Fatal("the spec lost the action mask")
			case !tc.ok && (!errors.Is(err, ErrMetadata) || !strings.Contains(err.Error(), "action_mask")):
				t.Fatalf("%v, want ErrMetadata about action_mask", err)
			}
		})
	}
}
