package dotenv

import (
	"strings"
	"testing"
)

func TestLineByLine(t *testing.T) {
	cases := []struct {
		line, key, value string
		problem          string // "" when the line must parse
	}{
		{"A=b", "A", "b", ""},
		{"export A=b", "A", "b", ""},
		{"  A  =  b  ", "A", "b", ""},
		{"A=", "A", "", ""},
		{`A="two words"`, "A", "two words", ""},
		{`A='two words'`, "A", "two words", ""},
		{`A="x # not a comment"`, "A", "x # not a comment", ""},
		{`A='x # not a comment'`, "A", "x # not a comment", ""},
		{"A=b # a comment", "A", "b", ""},
		{"A=b\t# a comment", "A", "b", ""},
		{"A=b#c", "A", "b#c", ""},
		{`A="line\nbreak"`, "A", "line\nbreak", ""},
		{`A='no\nescape'`, "A", `no\nescape`, ""},
		{`A="quote \" inside"`, "A", `quote " inside`, ""},
		{`A="x" # comment`, "A", "x", ""},
		{"A=b=c", "A", "b=c", ""},
		{"A=b\r", "A", "b", ""},
		{"_a1=v", "_a1", "v", ""},
		{"1A=v", "", "", "not a variable name"},
		{"A-B=v", "", "", "not a variable name"},
		{"=v", "", "", "not a variable name"},
		{"no equals sign", "", "", "no '='"},
		{`A="unterminated`, "", "", "unterminated double quote"},
		{`A='unterminated`, "", "", "unterminated single quote"},
	}
	for _, tc := range cases {
		entries, problems, err := Parse(strings.NewReader(tc.line))
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if tc.problem != "" {
			if len(entries) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.problem) {
				t.Errorf("%q: entries %v, problems %v; want the problem %q", tc.line, entries, problems, tc.problem)
			}
			continue
		}
		if len(problems) != 0 || len(entries) != 1 || entries[0].Key != tc.key || entries[0].Value != tc.value {
			t.Errorf("%q: entries %+v, problems %v; want %s=%q", tc.line, entries, problems, tc.key, tc.value)
		}
	}
}

func TestCommentsBlanksOrderAndBOM(t *testing.T) {
	in := "\ufeff# header\n\nA=1\n   # indented comment\nB=2\nA=3\n"
	entries, problems, err := Parse(strings.NewReader(in))
	if err != nil || len(problems) != 0 {
		t.Fatalf("%v %v", err, problems)
	}
	m := Map(entries)
	if len(entries) != 3 || m["A"] != "3" || m["B"] != "2" || entries[1].Line != 5 {
		t.Errorf("entries %+v, map %v", entries, m)
	}
}

// Problems name the line, never its value: .env holds secrets.
func TestProblemsNeverQuoteValues(t *testing.T) {
	_, problems, _ := Parse(strings.NewReader("GITHUB-TOKEN=ghp_secret\nX=\"ghp_secret2\n"))
	if len(problems) != 2 {
		t.Fatalf("problems %v", problems)
	}
	for _, p := range problems {
		if strings.Contains(p.String(), "ghp_secret") {
			t.Errorf("a problem quotes the value: %s", p)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"A=b", "export A='x y'", `A="a\"b"`, "A=b # c", "1=2", "A", "A=\"", "\ufeffA=1\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		entries, problems, err := Parse(strings.NewReader(in))
		if err != nil {
			return // a line longer than MaxSize
		}
		for _, e := range entries {
			if !validKey(e.Key) {
				t.Errorf("accepted key %q", e.Key)
			}
		}
		for _, p := range problems {
			if p.Line < 1 {
				t.Errorf("problem without a line: %v", p)
			}
		}
		// A plain value survives a round trip through single quotes.
		for _, e := range entries {
			if strings.ContainsAny(e.Value, "'\n\r") {
				continue
			}
			back, _, _ := Parse(strings.NewReader(e.Key + "='" + e.Value + "'"))
			if len(back) != 1 || back[0].Value != e.Value {
				t.Errorf("%s=%q does not round-trip: %+v", e.Key, e.Value, back)
			}
		}
	})
}
