package schemaregistry

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema: validated by compiling it with santhosh-tekuri/jsonschema
// (draft 7 unless $schema names another, as Confluent's registry
// assumes), with references added as resources under their names and
// every other URL refused, so that a schema cannot make the registry
// read a file or the network.
//
// Compatibility follows Confluent's JSON Schema rules, which come down
// to one question: does every document the writer's schema accepts
// pass the reader's? (BACKWARD asks it with the new schema as reader.)
// checkJSON walks both schemas answering it keyword by keyword: a
// property added to an open content model (additionalProperties not
// false) is incompatible because the writer allowed any value there; a
// property removed from a closed model is incompatible; a required
// property added, a type narrowed (number to integer), a maximum
// lowered, a minimum raised, an enum narrowed, items or properties
// tightened, a oneOf/anyOf branch removed are all incompatible; their
// opposites are compatible.

// jsonBase is the base URL of a JSON schema and its relative references.
const jsonBase = "mem://sluice/"

type jsonSchema struct {
	text string
	doc  any
	deps map[string]any // reference documents by absolute URL
}

func parseJSONSchema(text string, deps []namedSchema) (parsed, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(refuseLoader{})
	js := &jsonSchema{text: text, deps: map[string]any{}}
	for _, d := range deps {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(d.schema))
		if err != nil {
			return nil, fmt.Errorf("reference %s: %w", d.name, err)
		}
		u := jsonURL(d.name)
		if err := c.AddResource(u, doc); err != nil {
			return nil, fmt.Errorf("reference %s: %w", d.name, err)
		}
		js.deps[u] = doc
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, errors.New("a JSON schema is an object or a boolean")
	}
	if err := c.AddResource(jsonBase+"schema.json", doc); err != nil {
		return nil, err
	}
	if _, err := c.Compile(jsonBase + "schema.json"); err != nil {
		return nil, err
	}
	js.doc = doc
	return js, nil
}

// jsonURL is the absolute URL of a reference name.
func jsonURL(name string) string {
	u, err := url.Parse(name)
	if err == nil && u.IsAbs() {
		return name
	}
	base, _ := url.Parse(jsonBase)
	if err != nil {
		return jsonBase + name
	}
	return base.ResolveReference(u).String()
}

type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not a registered reference", u)
}

func (j *jsonSchema) canonical(normalize bool) string {
	return canonicalText(typeJSON, j.text, normalize)
}

func (j *jsonSchema) canRead(writer parsed) []string {
	w, ok := writer.(*jsonSchema)
	if !ok {
		return []string{"the schemas are of different types"}
	}
	c := &jsonCheck{r: j, w: w, seen: map[[2]string]bool{}}
	c.check("#", j.doc, j.doc, w.doc, w.doc)
	return c.msgs
}

// jsonCheck walks a reader and a writer schema.
type jsonCheck struct {
	r, w *jsonSchema
	seen map[[2]string]bool // $ref pairs already being compared (recursive schemas)
	msgs []string
}

func (c *jsonCheck) fail(path, format string, args ...any) {
	c.msgs = append(c.msgs, fmt.Sprintf("%s: ", path)+fmt.Sprintf(format, args...))
}

// deref follows $ref (local pointers and references) until a schema
// without one; root is the document a local pointer is read from.
func (s *jsonSchema) deref(root, v any) (any, any, string) {
	key := ""
	for range 32 {
		m, ok := v.(map[string]any)
		if !ok {
			return root, v, key
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return root, v, key
		}
		key = ref
		doc, frag, _ := strings.Cut(ref, "#")
		if doc != "" {
			d, ok := s.deps[jsonURL(doc)]
			if !ok {
				return root, true, key
			}
			root = d
		}
		v = pointer(root, frag)
	}
	return root, v, key
}

func pointer(doc any, frag string) any {
	if frag == "" || frag == "/" {
		return doc
	}
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return true
		}
		cur, ok = m[tok]
		if !ok {
			return true
		}
	}
	return cur
}

// check records why the reader schema rv does not accept every
// document the writer schema wv accepts.
func (c *jsonCheck) check(path string, rroot, rv, wroot, wv any) {
	var rk, wk string
	rroot, rv, rk = c.r.deref(rroot, rv)
	wroot, wv, wk = c.w.deref(wroot, wv)
	if rk != "" && wk != "" {
		k := [2]string{rk, wk}
		if c.seen[k] {
			return
		}
		c.seen[k] = true
		defer delete(c.seen, k)
	}
	if b, ok := wv.(bool); ok && !b {
		return // the writer accepts nothing
	}
	if b, ok := rv.(bool); ok {
		if !b {
			c.fail(path, "the reader accepts nothing")
		}
		return
	}
	r, _ := rv.(map[string]any)
	w, _ := wv.(map[string]any)
	if w == nil {
		w = map[string]any{}
	}
	if len(r) == 0 {
		return
	}

	// Sum types: every writer branch must be read by some reader branch.
	for _, kw := range []string{"oneOf", "anyOf"} {
		rbr, ok := r[kw].([]any)
		if !ok {
			continue
		}
		wbr := []any{stripKeys(w, "oneOf", "anyOf")}
		if x, ok := w["oneOf"].([]any); ok {
			wbr = x
		} else if x, ok := w["anyOf"].([]any); ok {
			wbr = x
		}
		for i, wb := range wbr {
			ok := false
			for _, rb := range rbr {
				sub := &jsonCheck{r: c.r, w: c.w, seen: c.seen}
				sub.check(path, rroot, rb, wroot, mergeSchemas(w, wb))
				if len(sub.msgs) == 0 {
					ok = true
					break
				}
			}
			if !ok {
				c.fail(path, "%s: no reader branch accepts writer branch %d", kw, i)
			}
		}
	}
	if rall, ok := r["allOf"].([]any); ok {
		for _, rb := range rall {
			c.check(path, rroot, rb, wroot, w)
		}
	}
	if _, ok := r["not"]; ok {
		if !jsonEqual(r["not"], w["not"]) {
			c.fail(path, "not: the reader's not schema changed")
		}
	}

	c.checkType(path, r, w)
	c.checkEnum(path, r, w)
	c.checkBounds(path, r, w)
	if s, ok := r["pattern"].(string); ok && s != w["pattern"] {
		c.fail(path, "pattern %q added or changed", s)
	}
	c.checkObject(path, rroot, r, wroot, w)
	c.checkArray(path, rroot, r, wroot, w)
}

// jsonTypes is a schema's type keyword as a set; nil when absent (any).
func jsonTypes(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var ts []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				ts = append(ts, s)
			}
		}
		return ts
	}
	return nil
}

func (c *jsonCheck) checkType(path string, r, w map[string]any) {
	rt := jsonTypes(r)
	if rt == nil {
		return
	}
	wt := jsonTypes(w)
	if wt == nil {
		c.fail(path, "type narrowed to %v", rt)
		return
	}
	for _, t := range wt {
		if slices.Contains(rt, t) || (t == "integer" && slices.Contains(rt, "number")) {
			continue
		}
		c.fail(path, "type %q is not read by type %v", t, rt)
	}
}

func (c *jsonCheck) checkEnum(path string, r, w map[string]any) {
	for _, kw := range []string{"enum", "const"} {
		rv, ok := r[kw]
		if !ok {
			continue
		}
		allowed := []any{rv}
		if kw == "enum" {
			allowed, _ = rv.([]any)
		}
		var written []any
		if e, ok := w["enum"].([]any); ok {
			written = e
		} else if x, ok := w["const"]; ok {
			written = []any{x}
		} else {
			c.fail(path, "%s added", kw)
			continue
		}
		for _, x := range written {
			if !slices.ContainsFunc(allowed, func(a any) bool { return jsonEqual(a, x) }) {
				c.fail(path, "%s narrowed: %v is no longer allowed", kw, x)
			}
		}
	}
}

// checkBounds compares the numeric limits: a reader's upper bound may
// not be below the writer's, nor its lower bound above.
func (c *jsonCheck) checkBounds(path string, r, w map[string]any) {
	upper := []string{"maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties"}
	lower := []string{"minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties"}
	for _, kw := range upper {
		rb, ok := num(r[kw])
		if !ok {
			continue
		}
		wb, ok := num(w[kw])
		if !ok || wb > rb {
			c.fail(path, "%s decreased or added", kw)
		}
	}
	for _, kw := range lower {
		rb, ok := num(r[kw])
		if !ok {
			continue
		}
		wb, ok := num(w[kw])
		if !ok || wb < rb {
			c.fail(path, "%s increased or added", kw)
		}
	}
	if rm, ok := num(r["multipleOf"]); ok {
		wm, ok := num(w["multipleOf"])
		if !ok || rm == 0 || math.Abs(math.Remainder(wm, rm)) > 1e-9 {
			c.fail(path, "multipleOf changed or added")
		}
	}
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case interface{ Float64() (float64, error) }:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// additional is what an object schema says about properties it does
// not list: nil for any value (open), false (closed), or a schema.
func additional(m map[string]any) any {
	a, ok := m["additionalProperties"]
	if !ok {
		return nil
	}
	if b, ok := a.(bool); ok && b {
		return nil
	}
	return a
}

func (c *jsonCheck) checkObject(path string, rroot any, r map[string]any, wroot any, w map[string]any) {
	rp, _ := r["properties"].(map[string]any)
	wp, _ := w["properties"].(map[string]any)
	ra, wa := additional(r), additional(w)
	for _, name := range sortedKeys(rp) {
		p := path + "/properties/" + name
		if ws, ok := wp[name]; ok {
			c.check(p, rroot, rp[name], wroot, ws)
			continue
		}
		// The writer does not list it: it allowed whatever its
		// additionalProperties allow.
		switch x := wa.(type) {
		case nil:
			if !isEmptySchema(rp[name]) {
				c.fail(p, "property added to an open content model")
			}
		case bool: // closed: the writer never wrote it
		default:
			c.check(p, rroot, rp[name], wroot, x)
		}
	}
	for _, name := range sortedKeys(wp) {
		if _, ok := rp[name]; ok {
			continue
		}
		p := path + "/properties/" + name
		switch x := ra.(type) {
		case nil:
		case bool:
			c.fail(p, "property removed from a closed content model")
		default:
			c.check(p, rroot, x, wroot, wp[name])
		}
	}
	switch x := ra.(type) {
	case nil:
	case bool:
		if wa != false {
			c.fail(path, "additionalProperties narrowed to false")
		}
	default:
		if wa == nil {
			c.check(path+"/additionalProperties", rroot, x, wroot, true)
		} else if wb, ok := wa.(bool); !ok || wb {
			c.check(path+"/additionalProperties", rroot, x, wroot, wa)
		}
	}
	rreq, wreq := stringSet(r["required"]), stringSet(w["required"])
	for _, name := range sortedKeys(rreq) {
		if _, ok := wreq[name]; !ok {
			c.fail(path, "required property %q added", name)
		}
	}
}

func (c *jsonCheck) checkArray(path string, rroot any, r map[string]any, wroot any, w map[string]any) {
	ri, rok := r["items"]
	wi, wok := w["items"]
	if rok {
		if _, tuple := ri.([]any); !tuple {
			if !wok {
				wi = true
			}
			if _, wtuple := wi.([]any); wtuple {
				for i, x := range wi.([]any) {
					c.check(fmt.Sprintf("%s/items/%d", path, i), rroot, ri, wroot, x)
				}
			} else {
				c.check(path+"/items", rroot, ri, wroot, wi)
			}
		} else if !jsonEqual(ri, wi) {
			c.fail(path, "tuple items changed")
		}
	}
	if u, _ := r["uniqueItems"].(bool); u {
		if wu, _ := w["uniqueItems"].(bool); !wu {
			c.fail(path, "uniqueItems added")
		}
	}
}

func isEmptySchema(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func stringSet(v any) map[string]any {
	out := map[string]any{}
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func stripKeys(m map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// mergeSchemas is a branch of a writer's oneOf/anyOf together with the
// keywords beside the oneOf.
func mergeSchemas(outer map[string]any, branch any) any {
	b, ok := branch.(map[string]any)
	if !ok {
		return branch
	}
	out := stripKeys(outer, "oneOf", "anyOf")
	for k, v := range b {
		out[k] = v
	}
	return out
}

func jsonEqual(a, b any) bool {
	return compactJSON(mustJSON(a), true) == compactJSON(mustJSON(b), true)
}
