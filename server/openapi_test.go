package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
)

// oaDoc is the part of the OpenAPI document the tests read.
type oaDoc struct {
	OpenAPI    string                     `json:"openapi"`
	Security   []map[string][]string      `json:"security"`
	Paths      map[string]map[string]oaOp `json:"paths"`
	Components struct {
		SecuritySchemes map[string]struct {
			Type, Scheme, Description string
		} `json:"securitySchemes"`
		Schemas    map[string]oaSchema   `json:"schemas"`
		Responses  map[string]oaResponse `json:"responses"`
		Parameters map[string]oaParam    `json:"parameters"`
	} `json:"components"`
}

type oaOp struct {
	OperationID string                 `json:"operationId"`
	Security    *[]map[string][]string `json:"security"`
	Parameters  []oaParam              `json:"parameters"`
	RequestBody *json.RawMessage       `json:"requestBody"`
	Responses   map[string]oaResponse  `json:"responses"`
}

type oaParam struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

type oaResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema struct {
			Ref string `json:"$ref"`
		} `json:"schema"`
	} `json:"content"`
}

type oaSchema struct {
	Required   []string                   `json:"required"`
	Properties map[string]json.RawMessage `json:"properties"`
	AllOf      []struct {
		Ref string `json:"$ref"`
	} `json:"allOf"`
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadDoc(t *testing.T) oaDoc {
	t.Helper()
	var d oaDoc
	if err := json.Unmarshal(OpenAPI(), &d); err != nil {
		t.Fatalf("openapi.json is not valid JSON of the expected shape: %v", err)
	}
	return d
}

// operations returns the operations of the document as "METHOD /path".
func (d oaDoc) operations() map[string]oaOp {
	ops := map[string]oaOp{}
	for path, item := range d.Paths {
		for m, op := range item {
			if slices.Contains(httpMethods, m) {
				ops[strings.ToUpper(m)+" "+path] = op
			}
		}
	}
	return ops
}

func TestOpenAPIIsValidJSON31(t *testing.T) {
	t.Parallel()
	if !json.Valid(OpenAPI()) {
		t.Fatal("openapi.json is not valid JSON")
	}
	d := loadDoc(t)
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(d.OpenAPI) {
		t.Errorf("openapi = %q, want 3.1.x", d.OpenAPI)
	}
	bearer, ok := d.Components.SecuritySchemes["bearerAuth"]
	if !ok || bearer.Type != "http" || bearer.Scheme != "bearer" {
		t.Errorf("securitySchemes.bearerAuth = %+v, want an http bearer scheme", bearer)
	}
	for _, word := range []string{"admin", "worker", "/internal/", "/healthz"} {
		if !strings.Contains(bearer.Description, word) {
			t.Errorf("bearerAuth description does not explain %q", word)
		}
	}
	if len(d.Security) != 1 || d.Security[0]["bearerAuth"] == nil {
		t.Errorf("global security = %v, want bearerAuth", d.Security)
	}
	// Every $ref points at something that exists.
	var root any
	_ = json.Unmarshal(OpenAPI(), &root)
	walkRefs(t, root, root)
}

func walkRefs(t *testing.T, root, v any) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			if !resolves(root, ref) {
				t.Errorf("$ref %q does not resolve", ref)
			}
		}
		for _, e := range x {
			walkRefs(t, root, e)
		}
	case []any:
		for _, e := range x {
			walkRefs(t, root, e)
		}
	}
}

func resolves(root any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	cur := root
	for _, seg := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[seg]; !ok {
			return false
		}
	}
	return true
}

// TestOpenAPIMatchesRoutes checks the document against the routes the server
// registers, both ways, so that neither can change without the other.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{})
	d := loadDoc(t)
	ops := d.operations()

	routes := map[string]route{}
	for _, r := range s.Routes() {
		routes[r.Method+" "+r.Path] = r
	}
	var missing, extra []string
	for k := range routes {
		if _, ok := ops[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range ops {
		if _, ok := routes[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes the server serves but openapi.json does not document: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("operations openapi.json documents but the server does not serve: %v", extra)
	}

	ids := map[string]string{}
	for k, op := range ops {
		r, ok := routes[k]
		if !ok {
			continue
		}
		t.Run(k, func(t *testing.T) { checkOperation(t, d, k, r, op) })
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", k)
		} else if prev, dup := ids[op.OperationID]; dup {
			t.Errorf("%s and %s share operationId %q", k, prev, op.OperationID)
		}
		ids[op.OperationID] = k
	}
}

// checkOperation checks one operation's parameters, security and responses
// against what the route does.
func checkOperation(t *testing.T, d oaDoc, key string, r route, op oaOp) {
	// Path parameters: exactly the template's.
	var want, got []string
	for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(r.Path, -1) {
		want = append(want, m[1])
	}
	for _, p := range op.Parameters {
		if p.Ref != "" {
			p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		if p.In == "path" {
			got = append(got, p.Name)
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(want, got) {
		t.Errorf("path parameters %v, want %v", got, want)
	}

	// Security: open routes say so; the others inherit bearerAuth.
	switch {
	case r.Scope == scopeOpen && (op.Security == nil || len(*op.Security) != 0):
		t.Errorf("open route: want security: [] (no token needed)")
	case r.Scope != scopeOpen && op.Security != nil:
		t.Errorf("route needs a token but overrides security with %v", *op.Security)
	}

	// Responses: a success, and every error the route can give.
	need := []string{"405"}
	if r.Scope != scopeOpen {
		need = append(need, "401", "500")
	}
	if r.Scope == scopeAdmin || (r.Method != "GET" && r.Method != "HEAD") { // a cross-site browser request: 403
		need = append(need, "403")
	}
	if op.RequestBody != nil {
		need = append(need, "400", "413")
	}
	if len(want) > 0 {
		need = append(need, "400")
	}
	if slices.Contains(want, "id") {
		need = append(need, "404")
	}
	if strings.HasPrefix(r.Path, "/internal/") && r.Path != "/internal/task-claim" && r.Path != "/internal/task-cancels" { // the fenced calls about one task
		need = append(need, "404", "409")
	}
	if r.Method == "POST" && (strings.HasSuffix(r.Path, "/cancel") || strings.HasSuffix(r.Path, "/requeue")) {
		need = append(need, "422")
	}
	readsBody := r.Path == "/jobs" || r.Path == "/jobs/{id}/cancel" || strings.HasPrefix(r.Path, "/internal/")
	if r.Method == "POST" && !readsBody && op.RequestBody != nil {
		t.Errorf("documents a request body the handler does not read")
	}
	if r.Method == "POST" && (r.Path == "/jobs" || strings.HasPrefix(r.Path, "/internal/")) && op.RequestBody == nil {
		t.Errorf("documents no request body")
	}
	for _, code := range need {
		if _, ok := op.Responses[code]; !ok {
			t.Errorf("does not list its %s response", code)
		}
	}
	success := false
	for code, resp := range op.Responses {
		if strings.HasPrefix(code, "2") {
			success = true
		}
		if code < "400" || (r.Path == "/healthz" && code == "503") { // /healthz answers 503 with its own body
			continue
		}
		if resp.Ref != "" {
			resp = d.Components.Responses[strings.TrimPrefix(resp.Ref, "#/components/responses/")]
		}
		if s := resp.Content["application/json"].Schema.Ref; s != "#/components/schemas/Error" {
			t.Errorf("response %s: schema %q, want the Error object", code, s)
		}
	}
	if !success {
		t.Errorf("lists no 2xx response")
	}
	if key == "POST /jobs" {
		for _, code := range []string{"200", "201", "400", "401", "403", "413"} {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("POST /jobs does not list %s", code)
			}
		}
	}
	if key == "POST /dlq/{id}/requeue" { // 201 a new job, 200 an earlier requeue's
		for _, code := range []string{"200", "201"} {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("POST /dlq/{id}/requeue does not list %s", code)
			}
		}
	}
}

// jsonFields lists the JSON names of a struct's fields, embedded ones included.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Anonymous {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// schemaProps lists a schema's properties, through allOf references.
func schemaProps(d oaDoc, name string) []string {
	s := d.Components.Schemas[name]
	var out []string
	for p := range s.Properties {
		out = append(out, p)
	}
	for _, a := range s.AllOf {
		out = append(out, schemaProps(d, strings.TrimPrefix(a.Ref, "#/components/schemas/"))...)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPISchemasMatchGo checks the schemas against the Go types that encode
// and decode them, so a new field cannot go undocumented.
func TestOpenAPISchemasMatchGo(t *testing.T) {
	t.Parallel()
	d := loadDoc(t)

	// The job: the keys its JSON actually has, all required (always present).
	b, err := json.Marshal(&drover.Job{})
	if err != nil {
		t.Fatal(err)
	}
	var job map[string]json.RawMessage
	_ = json.Unmarshal(b, &job)
	var jobKeys []string
	for k := range job {
		jobKeys = append(jobKeys, k)
	}
	sort.Strings(jobKeys)
	required := slices.Clone(d.Components.Schemas["Job"].Required)
	sort.Strings(required)
	if got := schemaProps(d, "Job"); !slices.Equal(got, jobKeys) {
		t.Errorf("Job schema properties\n got %v\nwant %v (driver/jobjson.go)", got, jobKeys)
	}
	if !slices.Equal(required, jobKeys) {
		t.Errorf("Job schema required\n got %v\nwant %v (every field is always present)", required, jobKeys)
	}
	for _, f := range []string{"id", "kind", "queue", "status", "attempt", "max_attempts", "priority", "run_at", "args", "result", "error", "errors", "created_at", "started_at", "finished_at", "rev"} {
		if !slices.Contains(required, f) {
			t.Errorf("Job schema does not require %q (issue 3)", f)
		}
	}

	tests := []struct {
		schema string
		typ    reflect.Type
	}{
		{"Task", reflect.TypeOf(Task{})},
		{"EnqueueRequest", reflect.TypeOf(enqueueRequest{})},
		{"ClaimRequest", reflect.TypeOf(claimRequest{})},
		{"HeartbeatRequest", reflect.TypeOf(fenceRequest{})},
		{"CompleteRequest", reflect.TypeOf(completeRequest{})},
		{"Error", reflect.TypeOf(errorBody{})},
	}
	for _, tt := range tests {
		if got, want := schemaProps(d, tt.schema), jsonFields(tt.typ); !slices.Equal(got, want) {
			t.Errorf("%s schema properties\n got %v\nwant %v (%s)", tt.schema, got, want, tt.typ)
		}
	}
	// Error codes: the enum lists every code the server uses.
	var codes struct {
		Properties struct {
			Error struct {
				Properties struct {
					Code struct {
						Enum []string `json:"enum"`
					} `json:"code"`
				} `json:"properties"`
			} `json:"error"`
		} `json:"properties"`
	}
	var comps struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &comps); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(comps.Components.Schemas["Error"], &codes); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{CodeInvalidArgument, CodeUnauthorized, CodeForbidden, CodeNotFound, CodeMethodNotAllowed,
		CodeLeaseLost, CodeConflict, CodePayloadTooLarge, CodeInvalidTransition, CodeUnavailable, CodeInternal} {
		if !slices.Contains(codes.Properties.Error.Properties.Code.Enum, c) {
			t.Errorf("Error schema's code enum lacks %q", c)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{AdminToken: "admin", WorkerToken: "worker"})
	status, hdr, body := call(t, s, "GET", "/openapi.json", "", nil)
	if status != 200 {
		t.Fatalf("GET /openapi.json without a token: %d, want 200", status)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if !bytes.Equal(body, OpenAPI()) {
		t.Errorf("GET /openapi.json serves %d bytes, not OpenAPI()'s %d", len(body), len(OpenAPI()))
	}
}
