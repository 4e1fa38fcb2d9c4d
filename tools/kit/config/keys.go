package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

var fileType = reflect.TypeFor[File]()

// checkKeys reports every key in raw that the schema type t does not declare,
// recursing into tables, maps of tables and arrays of tables. Each error names
// the file, the full dotted key and the keys allowed at that level.
func checkKeys(file, prefix string, raw map[string]any, t reflect.Type) []error {
	allowed := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" {
			continue
		}
		allowed[tag] = f.Type
		names = append(names, tag)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		full := joinKey(prefix, k)
		ft, ok := allowed[k]
		if !ok {
			where := "at the top level"
			if prefix != "" {
				where = "in [" + prefix + "]"
			}
			errs = append(errs, fmt.Errorf("%s: unknown key %q %s (allowed: %s)", file, full, where, strings.Join(names, ", ")))
			continue
		}
		errs = append(errs, checkValue(file, full, raw[k], ft)...)
	}
	return errs
}

func checkValue(file, key string, v any, t reflect.Type) []error {
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return []error{fmt.Errorf("%s: %s must be a table, not %s", file, key, tomlKind(v))}
		}
		return checkKeys(file, key, m, t)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return []error{fmt.Errorf("%s: %s must be a table, not %s", file, key, tomlKind(v))}
		}
		var errs []error
		for name, sub := range m {
			errs = append(errs, checkValue(file, joinKey(key, name), sub, t.Elem())...)
		}
		return errs
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Struct {
			return nil
		}
		items, ok := v.([]any)
		if !ok {
			if tables, ok := v.([]map[string]any); ok {
				for _, tb := range tables {
					items = append(items, tb)
				}
			} else {
				return []error{fmt.Errorf("%s: %s must be an array of tables, not %s", file, key, tomlKind(v))}
			}
		}
		var errs []error
		for i, item := range items {
			errs = append(errs, checkValue(file, fmt.Sprintf("%s[%d]", key, i), item, t.Elem())...)
		}
		return errs
	}
	return nil
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// environmentOrder returns the [environments.<name>] names in the order the
// file first mentions them. TOML decoding into maps loses order, and users
// expect "known environments" listed the way they wrote them.
func environmentOrder(data []byte) ([]string, error) {
	p := unstable.Parser{}
	p.Reset(data)
	seen := map[string]bool{}
	var order []string
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
	}
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e.Key())
			if len(table) >= 2 && table[0] == "environments" {
				add(table[1])
			}
		case unstable.KeyValue:
			key := keyParts(e.Key())
			full := append(append([]string{}, table...), key...)
			if len(full) >= 2 && full[0] == "environments" {
				add(full[1])
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	return order, nil
}

func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}
