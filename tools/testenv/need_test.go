package testenv

import "testing"

func TestInCIHonoursWhatCISystemsSet(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{"CI": "true"}, true},
		{map[string]string{"CI": "True"}, true},
		{map[string]string{"CI": "1"}, true},
		{map[string]string{"CI": "yes"}, true},
		{map[string]string{"CI": "woodpecker"}, true},
		{map[string]string{"TF_BUILD": "True"}, true},
		{map[string]string{"JENKINS_URL": "https://ci.example/"}, true},
		{map[string]string{}, false},
		{map[string]string{"CI": ""}, false},
		{map[string]string{"CI": "false"}, false},
		{map[string]string{"CI": "0"}, false},
		{map[string]string{"CI": " FALSE "}, false},
		{map[string]string{"CI": "off"}, false},
	} {
		if got := inCI(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("inCI(%v) = %t, want %t", c.env, got, c.want)
		}
	}
}
