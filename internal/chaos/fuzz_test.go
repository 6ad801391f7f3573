package chaos

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// openAPI is the part of the served OpenAPI 3.1 document the fuzzer reads.
type openAPI struct {
	Paths      map[string]map[string]*operation `json:"paths"`
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

type operation struct {
	OperationID string  `json:"operationId"`
	Parameters  []param `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
}

type param struct {
	Name   string  `json:"name"`
	In     string  `json:"in"`
	Schema *schema `json:"schema"`
}

type schema struct {
	Ref        string             `json:"$ref"`
	Type       any                `json:"type"` // "string" or ["string","null"]
	Properties map[string]*schema `json:"properties"`
	Items      *schema            `json:"items"`
}

func (s *schema) typ() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if e != "null" {
				return fmt.Sprint(e)
			}
		}
	}
	return ""
}

func (d *openAPI) resolve(s *schema) *schema {
	for s != nil && s.Ref != "" {
		s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// wrongValue is a JSON value of another type than s wants.
func wrongValue(s *schema) any {
	switch s.typ() {
	case "string":
		return 12345
	case "integer", "number":
		return "not a number"
	case "boolean":
		return "yes"
	case "array":
		return map[string]any{"not": "an array"}
	case "object":
		return []any{"not", "an", "object"}
	}
	return []any{map[string]any{"unexpected": true}}
}

type fuzzCase struct {
	name, method, path, contentType string
	body                            []byte
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// casesFor builds the abuse for one operation: bad path and query values,
// and for a body: none, malformed, oversized, wrong types per field,
// unknown fields, odd bytes and deep nesting.
func (d *openAPI) casesFor(method, path string, op *operation) []fuzzCase {
	kinds := map[string]string{}
	for _, p := range op.Parameters {
		if p.Schema != nil {
			kinds[p.In+":"+p.Name] = d.resolve(p.Schema).typ()
		}
	}
	fill := func(bad string) string {
		return pathParam.ReplaceAllStringFunc(path, func(m string) string {
			name := m[1 : len(m)-1]
			if bad != "" {
				return url.PathEscape(bad)
			}
			if k := kinds["path:"+name]; k == "integer" || k == "number" {
				return "1"
			}
			return "fuzz-" + name
		})
	}
	base := fill("")
	var cs []fuzzCase
	add := func(name, p, ct string, body []byte) {
		cs = append(cs, fuzzCase{name: name, method: strings.ToUpper(method), path: p, contentType: ct, body: body})
	}
	// The body a case without a body problem sends (a valid-looking empty one).
	ct, okBody := "", []byte(nil)
	var bodySchema *schema
	if op.RequestBody != nil {
		for c, v := range op.RequestBody.Content {
			ct, bodySchema = c, d.resolve(v.Schema)
		}
		switch {
		case strings.Contains(ct, "json"):
			okBody = []byte(`{}`)
		case strings.HasPrefix(ct, "multipart/"):
			okBody = []byte("--x\r\n\r\n--x--\r\n")
			ct = "multipart/form-data; boundary=x"
		default:
			okBody = []byte("{}\n")
		}
	}
	if strings.Contains(path, "{") {
		for _, bad := range []string{strings.Repeat("a", 10000), "../../etc/passwd", "%00\x00", "ü🙂\u202e", "-1", "99999999999999999999999", "a b;c'\"<>"} {
			add("path param "+fmt.Sprintf("%.20q", bad), fill(bad), ct, okBody)
		}
	}
	for _, p := range op.Parameters {
		if p.In != "query" {
			continue
		}
		vals := []string{strings.Repeat("x", 10000), "\x00\xff", "-1"}
		if k := kinds["query:"+p.Name]; k == "integer" || k == "number" || k == "boolean" {
			vals = append(vals, "abc", "1e999", "99999999999999999999999")
		}
		for _, v := range vals {
			add(fmt.Sprintf("query %s=%.20q", p.Name, v), base+"?"+url.Values{p.Name: {v}}.Encode(), ct, okBody)
		}
	}
	add("unknown query parameter", base+"?zz_unknown=1", ct, okBody)
	if op.RequestBody == nil {
		// A body where none is expected.
		add("unexpected body", base, "application/json", []byte(`{"zz":`))
		return cs
	}
	add("no body", base, ct, nil)
	add("wrong content type", base, "text/plain", []byte("hello"))
	add("malformed content type", base, "multipart/form-data; boundary=", []byte("--\r\n"))
	add("invalid UTF-8", base, ct, []byte("{\"a\":\"\xff\xfe\"}"))
	add("oversized (33 MiB)", base, ct, oversized(ct, 33<<20+2<<20))
	if strings.HasPrefix(ct, "multipart/") {
		add("multipart without the module part", base, ct, []byte("--x\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nhi\r\n--x--\r\n"))
		add("multipart truncated", base, ct, []byte("--x\r\nContent-Disposition: form-data; name=\"module\"; filename=\"a.wasm\"\r\n\r\n\x00asm"))
		add("module not wasm", base, ct, []byte("--x\r\nContent-Disposition: form-data; name=\"module\"; filename=\"a.wasm\"\r\n\r\nnot wasm\r\n--x--\r\n"))
		return cs
	}
	add("oversized (2 MiB)", base, ct, oversized(ct, 2<<20))
	add("malformed", base, ct, []byte(`{"a": [1, 2,`))
	add("not an object", base, ct, []byte(`[1,2,3]`))
	add("null", base, ct, []byte(`null`))
	add("deeply nested", base, ct, []byte(strings.Repeat("[", 100000)+strings.Repeat("]", 100000)))
	add("huge number", base, ct, []byte(`{"n": 1e999999, "m": -99999999999999999999999999999}`))
	add("unknown field", base, ct, []byte(`{"zz_unknown_field": 1}`))
	if bodySchema != nil {
		names := make([]string, 0, len(bodySchema.Properties))
		for n := range bodySchema.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ps := d.resolve(bodySchema.Properties[n])
			j, _ := json.Marshal(map[string]any{n: wrongValue(ps)})
			add("wrong type for "+n, base, ct, j)
			j, _ = json.Marshal(map[string]any{n: strings.Repeat("\u0000z", 50000)})
			add("long string for "+n, base, ct, j)
			if ps.typ() == "object" && len(ps.Properties) > 0 {
				for sub, ss := range ps.Properties {
					j, _ := json.Marshal(map[string]any{n: map[string]any{sub: wrongValue(d.resolve(ss))}})
					add("wrong type for "+n+"."+sub, base, ct, j)
				}
			}
		}
	}
	return cs
}

func oversized(ct string, n int) []byte {
	if strings.HasPrefix(ct, "multipart/") {
		head := "--x\r\nContent-Disposition: form-data; name=\"module\"; filename=\"a.wasm\"\r\n\r\n"
		return []byte(head + strings.Repeat("a", n) + "\r\n--x--\r\n")
	}
	return []byte(`{"note":"` + strings.Repeat("a", n) + `"}`)
}

// TestAPIAbuse runs against one `trainyard dev` (with its S3 as a process
// of its own and a one-node local cluster): every route of the served
// OpenAPI document fuzzed, then the load test.
func TestAPIAbuse(t *testing.T) {
	p := newPlane(t)
	p.clusterUp(oneNode)
	t.Run("status overview", func(t *testing.T) {
		p.t = t
		defer func() { p.t = p.root }()
		out := p.cli("status")
		for _, want := range []string{"Control plane " + p.ep.API + ": ready", "Cluster lab (up)", "node-a", "Queue: empty", "Runs: none yet"} {
			if !strings.Contains(out, want) {
				t.Errorf("trainyard status lacks %q:\n%s", want, out)
			}
		}
		var o struct {
			Ready    bool `json:"ready"`
			Clusters []struct {
				Status struct {
					Nodes []struct {
						Name string `json:"name"`
					} `json:"nodes"`
				} `json:"status"`
			} `json:"clusters"`
		}
		if err := json.Unmarshal([]byte(p.cli("status", "-o", "json")), &o); err != nil || !o.Ready || len(o.Clusters) != 1 || len(o.Clusters[0].Status.Nodes) != 1 {
			t.Errorf("status -o json: %+v %v", o, err)
		}
	})
	t.Run("fuzz every route", func(t *testing.T) {
		p.t = t
		defer func() { p.t = p.root }()
		fuzzRoutes(t, p)
	})
	t.Run("200 concurrent submissions", func(t *testing.T) {
		p.t = t
		defer func() { p.t = p.root }()
		loadTest(t, p)
	})
}

const oneNode = `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a}
`

func fuzzRoutes(t *testing.T, p *plane) {
	var doc openAPI
	if err := p.getJSON("/openapi.json", &doc); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(doc.Paths))
	for path := range doc.Paths {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	routes, total := 0, 0
	statuses := map[int]int{}
	for _, path := range paths {
		for method, op := range doc.Paths[path] {
			routes++
			cases := doc.casesFor(method, path, op)
			// And the route under a method it does not have.
			other := "PATCH"
			if _, ok := doc.Paths[path]["patch"]; ok {
				other = "PUT"
			}
			cases = append(cases, fuzzCase{name: "method not allowed", method: other, path: pathParam.ReplaceAllString(path, "x")})
			for _, c := range cases {
				total++
				code, hdr, raw, err := p.do(c.method, c.path, p.admin, c.contentType, c.body)
				if err != nil {
					t.Errorf("%s %s (%s): %v", c.method, path, c.name, err)
					continue
				}
				statuses[code]++
				checkAnswer(t, fmt.Sprintf("%s %s (%s)", c.method, path, c.name), code, hdr, raw)
			}
		}
	}
	for _, c := range []fuzzCase{
		{name: "unknown route", method: "GET", path: "/v1/no-such-route"},
		{name: "unknown route, no token", method: "POST", path: "/nope/../v1/runs"},
		{name: "absolute-form garbage", method: "GET", path: "/v1/runs/%2e%2e/%2e%2e"},
	} {
		total++
		code, hdr, raw, err := p.do(c.method, c.path, p.admin, "", nil)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
			continue
		}
		statuses[code]++
		checkAnswer(t, c.method+" "+c.path+" ("+c.name+")", code, hdr, raw)
	}
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var b strings.Builder
	for _, c := range codes {
		fmt.Fprintf(&b, " %d×%d", c, statuses[c])
	}
	show(fmt.Sprintf("API fuzz: %d routes, %d requests; statuses:%s", routes, total, b.String()))
	t.Logf("%d routes, %d requests; statuses:%s", routes, total, b.String())
	if routes < 30 {
		t.Fatalf("only %d routes in the served OpenAPI document", routes)
	}
}

// checkAnswer: never a 5xx; every error a problem document.
func checkAnswer(t *testing.T, what string, code int, hdr http.Header, raw []byte) {
	t.Helper()
	if code >= 500 {
		t.Errorf("%s: %d %.300s", what, code, raw)
		return
	}
	if code < 400 {
		return
	}
	mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type"))
	var prob struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	if mt != "application/problem+json" || json.Unmarshal(raw, &prob) != nil || prob.Status != code || prob.Title == "" {
		t.Errorf("%s: %d with %q, not a problem document: %.300s", what, code, hdr.Get("Content-Type"), raw)
	}
}
