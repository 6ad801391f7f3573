package learner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Overlay sets cfg's fields (a pointer to an algorithm's JSON-tagged
// config) from hyper, by JSON name: the one way every algorithm takes
// hyper-parameters. A name cfg lacks, one of reserved (the run's own
// fields, such as seed) or a value of the wrong type is a *FieldError
// naming hyperparameters.<name>.
func Overlay(cfg any, hyper map[string]any, reserved ...string) error {
	if len(hyper) == 0 {
		return nil
	}
	base, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	var merged map[string]any
	if err := json.Unmarshal(base, &merged); err != nil {
		return err
	}
	known := func() string {
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(merged)) {
			if !slices.Contains(reserved, k) {
				ks = append(ks, k)
			}
		}
		return strings.Join(ks, ", ")
	}
	for _, k := range slices.Sorted(maps.Keys(hyper)) {
		if slices.Contains(reserved, k) {
			return &FieldError{Field: "hyperparameters." + k, Reason: "set it as the run's own field"}
		}
		if _, ok := merged[k]; !ok {
			return &FieldError{Field: "hyperparameters." + k, Reason: "unknown hyper-parameter (known: " + known() + ")"}
		}
		merged[k] = hyper[k]
	}
	b, _ := json.Marshal(merged)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &FieldError{Field: "hyperparameters." + te.Field, Reason: fmt.Sprintf("got a %s, want %s", te.Value, kind(te.Type))}
		}
		return &FieldError{Field: "hyperparameters", Reason: err.Error()}
	}
	return nil
}

// kind says a Go type as JSON would.
func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		e := kind(t.Elem())
		return "a list (of " + e + " each)"
	case reflect.String:
		return "a string"
	}
	return t.String()
}
