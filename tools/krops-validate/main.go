// Command krops-validate checks the declarative trees (mgmt/, workload/):
// every kustomization builds, every object passes a server-side dry run on
// a real kube-apiserver with the pinned CRDs, and the cross-checks between
// the trees, bootstrap.toml and the air-gap inventory hold. `task validate`
// runs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/krops-validate/internal/validate"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(cli.Run(context.Background(), newApp(), os.Args, cli.RunOptions{}))
}

// newApp is the command line: what main parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	return cli.New(cli.Options{
		Name:  "krops-validate",
		Usage: "check the declarative trees before Flux sees them",
		Description: `Prints one line per check, then each failure with its file and object. The schema check needs
KUBEBUILDER_ASSETS pointing at kube-apiserver and etcd (tools/task.sh testbin prints the directory); --skip-schema
leaves it out and says so.`,
		Version: version,
		Knobs:   []string{"BOOTSTRAP_CONFIG"},
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "skip-schema", Usage: "do not start kube-apiserver; the schema check is reported as skipped"},
		},
		Action: run,
	})
}

func run(c *ucli.Context) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	conf, err := config.Load(config.LoadOptions{Lookup: cli.Lookup(c), WorkDir: wd})
	if err != nil {
		return cli.UsageError(err)
	}
	in, err := validate.Load(conf.Root, conf)
	if err != nil {
		return err
	}
	results := validate.Static(in)
	if c.Bool("skip-schema") {
		fmt.Fprintln(c.App.Writer, "- schema check skipped (--skip-schema): objects were not submitted to kube-apiserver")
	} else {
		r, err := validate.Schema(c.Context, in.Objects)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	failed := validate.Print(cli.Printer(c, c.App.Writer), results)
	if failed > 0 {
		return errors.New(fmt.Sprint(failed, " checks failed"))
	}
	return nil
}
