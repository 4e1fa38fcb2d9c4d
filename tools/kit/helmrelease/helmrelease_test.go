package helmrelease

import "testing"

// A release installed from cert-manager's chart (published as v1.21.2) is
// already at the pin "1.21.2": without this every run would upgrade it.
func TestSameVersion(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"v1.21.2", "1.21.2", true},
		{"1.21.2", "v1.21.2", true},
		{"0.29.0", "0.29.0", true},
		{"v1.21.2", "1.21.3", false},
		{"1.21.2", "1.21.2-rc.1", false},
		{"", "", false},
		{"vv1.0.0", "1.0.0", false},
	} {
		if got := SameVersion(c.a, c.b); got != c.want {
			t.Errorf("SameVersion(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
