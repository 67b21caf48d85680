package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The OCSF schemas the encodings are checked against, each the event
// classes our encodings use, their categories and the base event, the
// objects they hold, the profiles those include, the dictionary and the
// categories, as published (Apache-2.0, LICENSE and NOTICE beside them;
// testdata/README.md says where from):
//   - ocsf15Dir, v1.5.0 (tag 1.5.0, commit 78bf68a2), for ocsf@1.5;
//   - ocsf19Dir, 1.9.0-dev (main at commit a5cfc68e, 2026-07-23, the
//     newest the snapshot we could fetch holds: no 1.9.0 tag yet), with
//     the record_integrity profile and the attestation and fingerprint
//     objects, for ocsf (1.9).
const (
	ocsf15Dir = "testdata/ocsf-schema-1.5.0"
	ocsf19Dir = "testdata/ocsf-schema-1.9.0-dev"
)

type ocsfAttr struct {
	Requirement string                     `json:"requirement"`
	Type        string                     `json:"type"`
	Enum        map[string]json.RawMessage `json:"enum"`
	// profile names the profile that brings the attribute to a class
	// that does not define it itself, "" for the class's own.
	profile string
}

type ocsfDef struct {
	Name        string                     `json:"name"`
	Caption     string                     `json:"caption"`
	UID         *int                       `json:"uid"`
	Extends     string                     `json:"extends"`
	Category    string                     `json:"category"`
	Attributes  map[string]json.RawMessage `json:"attributes"`
	Constraints map[string][]string        `json:"constraints"`
}

// ocsfSchema is the part of the schema the test reads, resolved: each
// class and object with its attributes merged down its extends chain.
type ocsfSchema struct {
	dir        string
	profiles   map[string]*ocsfDef // name -> profile, as read by $include
	dict       map[string]ocsfAttr
	categories map[string]int // name -> uid
	catCaption map[int]string
	classes    map[int]*resolved // class_uid -> class
	objects    map[string]*resolved
}

type resolved struct {
	caption     string
	attrs       map[string]ocsfAttr
	constraints map[string][]string
}

func readJSON(t *testing.T, dir, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// ownAttrs returns d's own attributes and, as optional attributes, those of
// the profiles it includes (a profile's attributes are known to the class
// but required only when the profile applies).
func (s *ocsfSchema) ownAttrs(t *testing.T, d *ocsfDef) (own, included map[string]ocsfAttr) {
	own, included = map[string]ocsfAttr{}, map[string]ocsfAttr{}
	for k, raw := range d.Attributes {
		if k == "$include" {
			var incs []string
			if json.Unmarshal(raw, &incs) != nil {
				var one string
				if err := json.Unmarshal(raw, &one); err != nil {
					t.Fatalf("%s: $include: %v", d.Name, err)
				}
				incs = []string{one}
			}
			for _, inc := range incs {
				p := new(ocsfDef)
				readJSON(t, s.dir, inc, p)
				s.profiles[p.Name] = p
				for pk, praw := range p.Attributes {
					var a ocsfAttr
					_ = json.Unmarshal(praw, &a)
					a.Requirement = "optional"
					a.profile = p.Name
					included[pk] = a
				}
			}
			continue
		}
		var a ocsfAttr
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("%s.%s: %v", d.Name, k, err)
		}
		own[k] = a
	}
	return own, included
}

// merge lays the levels of an extends chain, base first, onto one set of
// attributes: a level overrides what it names (requirement, enum), and
// profile attributes only add what no level defines.
func (s *ocsfSchema) merge(t *testing.T, chain []*ocsfDef) *resolved {
	r := &resolved{attrs: map[string]ocsfAttr{}}
	inc := map[string]ocsfAttr{}
	for _, d := range chain {
		own, included := s.ownAttrs(t, d)
		for k, a := range own {
			prev := r.attrs[k]
			if a.Requirement == "" {
				a.Requirement = prev.Requirement
			}
			if a.Enum == nil {
				a.Enum = prev.Enum
			} else if prev.Enum != nil {
				// A class's activities add to the base event's Unknown
				// and Other.
				for id, e := range prev.Enum {
					if _, ok := a.Enum[id]; !ok {
						a.Enum[id] = e
					}
				}
			}
			if a.Type == "" {
				a.Type = prev.Type
			}
			r.attrs[k] = a
		}
		for k, a := range included {
			inc[k] = a
		}
		if d.Constraints != nil {
			r.constraints = d.Constraints
		}
		r.caption = d.Caption
	}
	for k, a := range inc {
		if _, ok := r.attrs[k]; !ok {
			r.attrs[k] = a
		}
	}
	return r
}

func loadOCSF(t *testing.T, dir string) *ocsfSchema {
	t.Helper()
	s := &ocsfSchema{dir: dir, profiles: map[string]*ocsfDef{}, categories: map[string]int{}, catCaption: map[int]string{}, classes: map[int]*resolved{}, objects: map[string]*resolved{}}
	var dict struct {
		Attributes map[string]ocsfAttr `json:"attributes"`
	}
	readJSON(t, dir, "dictionary.json", &dict)
	s.dict = dict.Attributes
	var cats struct {
		Attributes map[string]struct {
			UID     int    `json:"uid"`
			Caption string `json:"caption"`
		} `json:"attributes"`
	}
	readJSON(t, dir, "categories.json", &cats)
	for name, c := range cats.Attributes {
		s.categories[name] = c.UID
		s.catCaption[c.UID] = c.Caption
	}

	events := map[string]*ocsfDef{}
	err := filepath.WalkDir(filepath.Join(dir, "events"), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		d := new(ocsfDef)
		readJSON(t, dir, rel, d)
		events[d.Name] = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range events {
		if d.UID == nil {
			continue // a category's base class or the base event
		}
		chain := []*ocsfDef{d}
		for p := d; p.Extends != ""; {
			p = events[p.Extends]
			if p == nil {
				t.Fatalf("class %s: its parent is not in testdata", d.Name)
			}
			chain = append([]*ocsfDef{p}, chain...)
		}
		cat := ""
		for _, c := range chain {
			if c.Category != "" {
				cat = c.Category
			}
		}
		uid := s.categories[cat]*1000 + *d.UID
		s.classes[uid] = s.merge(t, chain)
	}
	return s
}

func (s *ocsfSchema) object(t *testing.T, name string) *resolved {
	t.Helper()
	if r, ok := s.objects[name]; ok {
		return r
	}
	var chain []*ocsfDef
	for n := name; n != ""; {
		d := new(ocsfDef)
		readJSON(t, s.dir, "objects/"+n+".json", d)
		chain = append([]*ocsfDef{d}, chain...)
		n = d.Extends
	}
	r := s.merge(t, chain)
	s.objects[name] = r
	return r
}

// check returns every way event breaks the committed schema: a required
// attribute missing, an at_least_one or just_one constraint broken, an
// attribute the class or object does not define, an id outside its enum,
// or a class, category, type or activity that does not add up.
func (s *ocsfSchema) check(t *testing.T, event []byte) []string {
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		return []string{err.Error()}
	}
	uid := int(num(ev["class_uid"]))
	c := s.classes[uid]
	if c == nil {
		return []string{fmt.Sprintf("class_uid %d is not a class of the committed schema", uid)}
	}
	var errs []string
	errs = append(errs, s.checkObject(t, "event", c, ev)...)
	errs = append(errs, s.checkProfiles(c, ev)...)
	act := int(num(ev["activity_id"]))
	if got, want := int(num(ev["category_uid"])), uid/1000; got != want {
		errs = append(errs, fmt.Sprintf("category_uid %d, want %d", got, want))
	}
	if got, want := int(num(ev["type_uid"])), uid*100+act; got != want {
		errs = append(errs, fmt.Sprintf("type_uid %d, want %d", got, want))
	}
	if got := ev["class_name"]; got != c.caption {
		errs = append(errs, fmt.Sprintf("class_name %q, want %q", got, c.caption))
	}
	if got, want := ev["category_name"], s.catCaption[uid/1000]; got != want {
		errs = append(errs, fmt.Sprintf("category_name %q, want %q", got, want))
	}
	if cap := caption(c.attrs["activity_id"].Enum, act); ev["activity_name"] != cap {
		errs = append(errs, fmt.Sprintf("activity_name %q, want %q", ev["activity_name"], cap))
	}
	if cap := caption(s.dict["severity_id"].Enum, int(num(ev["severity_id"]))); ev["severity"] != cap {
		errs = append(errs, fmt.Sprintf("severity %q, want %q", ev["severity"], cap))
	}
	return errs
}

// checkProfiles: an attribute the class has only through the
// record_integrity profile needs that profile in metadata.profiles, and
// every profile named there must be one of the schema's. (Other profiles'
// attributes are not held to it: the mapping's actor is, in some classes,
// the host profile's, and the events have never named host; see
// docs/export.md.)
func (s *ocsfSchema) checkProfiles(c *resolved, ev map[string]any) []string {
	var errs []string
	named := map[string]bool{}
	if md, ok := ev["metadata"].(map[string]any); ok {
		ps, _ := md["profiles"].([]any)
		for _, p := range ps {
			name, _ := p.(string)
			if _, err := os.Stat(filepath.Join(s.dir, "profiles", name+".json")); name == "" || err != nil {
				errs = append(errs, fmt.Sprintf("metadata.profiles: %v is not a profile of the schema", p))
			}
			named[name] = true
		}
	}
	keys := make([]string, 0, len(ev))
	for k := range ev {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if p := c.attrs[k].profile; p == "record_integrity" && !named[p] {
			errs = append(errs, fmt.Sprintf("event: attribute %s belongs to profile %s, which metadata.profiles does not name", k, p))
		}
	}
	return errs
}

func caption(enum map[string]json.RawMessage, id int) string {
	var e struct {
		Caption string `json:"caption"`
	}
	_ = json.Unmarshal(enum[strconv.Itoa(id)], &e)
	return e.Caption
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func (s *ocsfSchema) checkObject(t *testing.T, path string, r *resolved, v map[string]any) []string {
	var errs []string
	for k, a := range r.attrs {
		if a.Requirement == "required" {
			if _, ok := v[k]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required attribute %s missing", path, k))
			}
		}
	}
	for kind, names := range r.constraints {
		n := 0
		for _, k := range names {
			if _, ok := v[k]; ok {
				n++
			}
		}
		if (kind == "at_least_one" && n == 0) || (kind == "just_one" && n != 1) {
			errs = append(errs, fmt.Sprintf("%s: constraint %s %v broken", path, kind, names))
		}
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		a, ok := r.attrs[k]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: attribute %s is not defined here", path, k))
			continue
		}
		d := s.dict[k]
		typ := a.Type
		if typ == "" {
			typ = d.Type
		}
		enum := a.Enum
		if enum == nil {
			enum = d.Enum
		}
		if strings.HasSuffix(k, "_id") && enum != nil {
			if _, ok := enum[strconv.Itoa(int(num(v[k])))]; !ok && num(v[k]) != 0 && num(v[k]) != 99 {
				errs = append(errs, fmt.Sprintf("%s.%s: %v is not in its enum", path, k, v[k]))
			}
		}
		switch {
		case typ == "" || strings.HasSuffix(typ, "_t") || typ == "object":
			// a scalar, or unmapped/data: free-form by design
		default:
			sub := s.object(t, typ)
			items := []any{v[k]}
			if arr, ok := v[k].([]any); ok {
				items = arr
			}
			for i, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					errs = append(errs, fmt.Sprintf("%s.%s[%d]: want an object (%s)", path, k, i, typ))
					continue
				}
				errs = append(errs, s.checkObject(t, path+"."+k, sub, m)...)
			}
		}
	}
	return errs
}
