package main

import (
	"encoding/json"
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kindsetup"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/teardown"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/teardownsetup"
)

func teardownAction(c *ucli.Context) error {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return cli.Usagef("--output %q: want text or json", format)
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	// Two teardowns, or a teardown and a bootstrap or pivot, of one kind
	// cluster never run at once.
	lk, err := kindsetup.Hold(sel.Config.Bootstrap.KindCluster, sel.Knobs.RunID, prog)
	if err != nil {
		return err
	}
	defer lk.Release()
	if sel.Knobs.AWSOnly {
		return sweep(c, sel)
	}
	s, err := teardownsetup.Load(c.Context, sel, teardownsetup.Params{
		DryRun: c.Bool("dry-run"), QueryTimeout: c.Duration("query-timeout"), MaxIdlePasses: c.Int("max-idle-passes"),
		Verbose: c.Bool("verbose"), Progress: prog, Out: c.App.ErrWriter,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Manual != "" {
		fmt.Fprint(c.App.Writer, s.Manual)
		return cli.Usagef("krops does not tear %s down: follow the steps above", sel.Environment.Name)
	}
	o := s.Options
	o.StopAfter = stopAfter()
	sum, err := teardown.Run(c.Context, o)
	printSummary(c, format, sum)
	switch {
	case errors.Is(err, teardown.ErrOtherEnvironment):
		return cli.UsageError(err)
	case errors.Is(err, teardown.ErrUnknownState):
		return cli.UnknownStateError(err)
	}
	return err
}

func printSummary(c *ucli.Context, format string, sum *teardown.Summary) {
	if sum == nil {
		return
	}
	if format == "json" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintln(c.App.Writer, string(b))
		return
	}
	w := c.App.Writer
	verb := "Deleted"
	if sum.DryRun {
		verb = "Would delete (dry run; nothing was changed)"
	}
	fmt.Fprintf(w, "Teardown of %s (controller host: %s)\n", sum.Environment, sum.Host)
	for _, sec := range []struct {
		title string
		items []string
	}{{verb, sum.Deleted}, {"Skipped", sum.Skipped}, {"Left", sum.Left}} {
		if len(sec.items) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", sec.title)
		for _, it := range sec.items {
			fmt.Fprintf(w, "  - %s\n", it)
		}
	}
	if sum.Next != "" {
		fmt.Fprintf(w, "Next: %s\n", sum.Next)
	}
}
