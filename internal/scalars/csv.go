package scalars

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Tags lists the tags of steps in the order they first appear.
func Tags(steps []Step) []string {
	var tags []string
	seen := map[string]bool{}
	for _, s := range steps {
		for _, v := range s.Values {
			if !seen[v.Tag] {
				seen[v.Tag] = true
				tags = append(tags, v.Tag)
			}
		}
	}
	return tags
}

// WriteCSV writes steps as a table with a header: step, wall_time, then
// one column per tag (first-seen order); a step without a tag leaves its
// cell empty. Values keep full float64 precision.
func WriteCSV(w io.Writer, steps []Step) error {
	tags := Tags(steps)
	col := map[string]int{}
	for i, t := range tags {
		col[t] = i + 2
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(append([]string{"step", "wall_time"}, tags...)); err != nil {
		return err
	}
	row := make([]string, len(tags)+2)
	for _, s := range steps {
		clear(row)
		row[0] = strconv.FormatInt(s.Step, 10)
		row[1] = strconv.FormatFloat(s.WallTime, 'f', -1, 64)
		for _, v := range s.Values {
			row[col[v.Tag]] = strconv.FormatFloat(v.Value, 'g', -1, 64)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ParseCSV reads what WriteCSV wrote.
func ParseCSV(r io.Reader) ([]Step, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("csv: %w", err)
	}
	if len(recs) == 0 || len(recs[0]) < 2 || recs[0][0] != "step" || recs[0][1] != "wall_time" {
		return nil, fmt.Errorf("csv: header must start with step,wall_time")
	}
	tags := recs[0][2:]
	var out []Step
	for i, rec := range recs[1:] {
		s := Step{}
		if s.Step, err = strconv.ParseInt(rec[0], 10, 64); err != nil {
			return nil, fmt.Errorf("csv row %d: step: %w", i+1, err)
		}
		if s.WallTime, err = strconv.ParseFloat(rec[1], 64); err != nil {
			return nil, fmt.Errorf("csv row %d: wall_time: %w", i+1, err)
		}
		for j, cell := range rec[2:] {
			if strings.TrimSpace(cell) == "" {
				continue
			}
			v, err := strconv.ParseFloat(cell, 64)
			if err != nil {
				return nil, fmt.Errorf("csv row %d: %s: %w", i+1, tags[j], err)
			}
			s.Values = append(s.Values, Value{Tag: tags[j], Value: v})
		}
		out = append(out, s)
	}
	return out, nil
}

// ScalarPoint is one value of a tag's curve.
type ScalarPoint struct {
	Step     int64   `json:"step"`
	WallTime float64 `json:"wall_time" doc:"Seconds since the Unix epoch."`
	Value    float64 `json:"value"`
}

// Series turns steps into one curve per tag, steps ascending as given.
// NaN and infinite values (JSON has none) are left out.
func Series(steps []Step) map[string][]ScalarPoint {
	out := map[string][]ScalarPoint{}
	for _, s := range steps {
		for _, v := range s.Values {
			if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
				continue
			}
			out[v.Tag] = append(out[v.Tag], ScalarPoint{Step: s.Step, WallTime: s.WallTime, Value: v.Value})
		}
	}
	return out
}

// Latest is each tag's newest point (NaN and infinite values left out).
func Latest(steps []Step) map[string]ScalarPoint {
	out := map[string]ScalarPoint{}
	for tag, ps := range Series(steps) {
		out[tag] = ps[len(ps)-1]
	}
	return out
}
