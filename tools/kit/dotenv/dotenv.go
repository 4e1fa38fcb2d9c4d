// Package dotenv reads a .env file the way the chain's two entry points do:
// task (Taskfile.yml dotenv) and mise ([env] _.file) agree on these rules,
// and krops's own wrappers (the toolbox) must see the same values.
//
//   - one KEY=value per line; blank lines and lines starting with # are
//     ignored; an "export " prefix is allowed;
//   - whitespace around the key and an unquoted value is trimmed;
//   - 'single quotes' keep the value as written; "double quotes" allow \n,
//     \t, \" and \\ escapes; quotes end the value (a comment may follow);
//   - in an unquoted value, # starts a comment only after whitespace
//     (a#b is a value);
//   - a line without =, or whose key is not [A-Za-z_][A-Za-z0-9_]*, is
//     reported by line number, never with its value (.env holds secrets).
//     mise refuses such a file whole, and so does task (but for a key
//     starting with a digit), so a caller should refuse it too.
package dotenv

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSize bounds a .env file: it is a handful of lines.
const MaxSize = 1 << 20

// Problem is a line that was skipped.
type Problem struct {
	Line   int
	Reason string
}

func (p Problem) String() string { return fmt.Sprintf("line %d: %s", p.Line, p.Reason) }

// Entry is one variable, in file order.
type Entry struct {
	Key, Value string
	Line       int
}

// Parse reads r. A later line for the same key wins, as in both tools.
func Parse(r io.Reader) ([]Entry, []Problem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxSize)
	var out []Entry
	var problems []Problem
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, "export "); ok {
			trimmed = strings.TrimSpace(rest)
		}
		key, raw, ok := strings.Cut(trimmed, "=")
		if !ok {
			problems = append(problems, Problem{n, "not KEY=value (no '=')"})
			continue
		}
		key = strings.TrimSpace(key)
		if !validKey(key) {
			problems = append(problems, Problem{n, fmt.Sprintf("%q is not a variable name (letters, digits and _, not starting with a digit)", key)})
			continue
		}
		value, err := parseValue(strings.TrimSpace(raw))
		if err != nil {
			problems = append(problems, Problem{n, key + ": " + err.Error()})
			continue
		}
		out = append(out, Entry{Key: key, Value: value, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return out, problems, nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func parseValue(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	switch raw[0] {
	case '\'':
		end := strings.IndexByte(raw[1:], '\'')
		if end < 0 {
			return "", fmt.Errorf("unterminated single quote")
		}
		return raw[1 : 1+end], nil
	case '"':
		var b strings.Builder
		for i := 1; i < len(raw); i++ {
			c := raw[i]
			switch {
			case c == '\\' && i+1 < len(raw):
				i++
				switch raw[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				case '"', '\\':
					b.WriteByte(raw[i])
				default:
					b.WriteByte('\\')
					b.WriteByte(raw[i])
				}
			case c == '"':
				return b.String(), nil
			default:
				b.WriteByte(c)
			}
		}
		return "", fmt.Errorf("unterminated double quote")
	}
	// Unquoted: a # after whitespace starts a comment.
	for i := 1; i < len(raw); i++ {
		if raw[i] == '#' && (raw[i-1] == ' ' || raw[i-1] == '\t') {
			return strings.TrimSpace(raw[:i]), nil
		}
	}
	return raw, nil
}

// Load parses the file at path. A missing file is no error (nil, nil,
// nil): .env is optional. Anything but a regular file of at most MaxSize
// bytes is refused, naming the path.
func Load(path string) ([]Entry, []Problem, error) {
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	if st.Size() > MaxSize {
		return nil, nil, fmt.Errorf("%s is %d bytes, more than a .env can be (%d)", path, st.Size(), MaxSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	entries, problems, err := Parse(io.LimitReader(f, MaxSize))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, problems, nil
}

// Map is entries as a map, later lines winning.
func Map(entries []Entry) map[string]string {
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		m[e.Key] = e.Value
	}
	return m
}
