//go:build capa

// The CAPA lane (task test:capa; docs/testing.md): compiling CAPA's
// template renderer costs more than the cold CI budget can carry beside
// everything else, so this file compiles only with -tags capa.

package main_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/kropsdev/krops/tools/testenv"
)

// The embedded template is what CAPA renders at the version
// tools/capa-iam-template pins (its own module: it builds CAPA).
func TestTheTemplateIsCAPAs(t *testing.T) {
	testenv.Integration(t)
	cmd := exec.Command("go", "run", ".", "-check", "../krops-aws/internal/iamstack/template.json")
	cmd.Dir = "../capa-iam-template"
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
