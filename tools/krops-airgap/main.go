// Command krops-airgap prepares the air-gap package (airgap/zarf.yaml): it
// checks the package against the image inventory and bootstrap.toml, pins
// image digests from their registries, and builds and pushes the config
// artifact the package carries. `task airgap:build` chains them.
package main

import (
	"context"
	"os"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/krops-airgap/internal/airgap"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	return cli.Run(context.Background(), newApp(), args, cli.RunOptions{})
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	insecure := &ucli.BoolFlag{Name: "insecure", Usage: "allow plain HTTP to registries that are not on loopback (loopback always uses HTTP)"}
	app := cli.New(cli.Options{
		Name:  "krops-airgap",
		Usage: "prepare the air-gap package (airgap/zarf.yaml)",
		Description: `The package is built on a machine that reaches the registries and deployed where nothing does
(docs/airgap.md). Every image it carries is pinned by digest in airgap/images.txt; entries marked pending there are
resolved by 'krops-airgap pin'. Registry credentials come from the Docker credential configuration (docker login),
never from flags.`,
		Version: version,
		Knobs:   []string{"BOOTSTRAP_CONFIG"},
		Commands: []*ucli.Command{
			{
				Name:  "check",
				Usage: "check airgap/zarf.yaml against airgap/images.txt, bootstrap.toml [charts] and the files it carries",
				Description: `Without --release, images waiting for a digest and manifests the build renders are listed with "…" and
do not fail the check; with --release (the package is about to be built) they do.`,
				Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "release", Usage: "fail on anything not yet pinned or rendered"}},
				Action: check,
			},
			{
				Name:  "pin",
				Usage: "resolve pending digests in airgap/images.txt from their registries and write them into zarf.yaml too",
				Description: `Pinned entries are never changed unless --refresh is given; then a tag that moved is re-pinned and
reported with "!". Entries that resolve are written even if others fail; the failures are listed and the exit code
is 1.`,
				Flags: []ucli.Flag{
					&ucli.BoolFlag{Name: "refresh", Usage: "re-resolve pinned entries as well"},
					&ucli.BoolFlag{Name: "dry-run", Usage: "print what would change and write nothing"},
					&ucli.IntFlag{Name: "concurrency", Value: 8, Usage: "registry requests in flight"},
					insecure,
				},
				Action: pin,
			},
			{
				Name:      "config",
				Usage:     "build the config artifact (the trees Flux reconciles in the air-gapped cluster) and push it",
				ArgsUsage: "[REF]",
				Description: `Packs --path (default: airgap/config and mgmt/local-host) into a reproducible Flux OCI artifact, then
proves that --sync-path and every path its Flux Kustomizations name build from the artifact alone. Only then is it
pushed to REF (default ` + airgap.ConfigRepository + `:local-host, the build machine's loopback registry). Without
--push nothing is pushed.`,
				Flags: []ucli.Flag{
					&ucli.StringSliceFlag{Name: "path", Value: ucli.NewStringSlice("airgap/config", "mgmt/local-host"), Usage: "repository paths to pack"},
					&ucli.StringFlag{Name: "sync-path", Value: "airgap/config", Usage: "the path the FluxInstance syncs"},
					&ucli.BoolFlag{Name: "push", Usage: "push the artifact after the check"},
					&ucli.StringFlag{Name: "source", Usage: "repository URL recorded in the artifact"},
					&ucli.StringFlag{Name: "revision", Usage: `revision recorded in the artifact, Flux's form "<branch>@sha1:<commit>"`},
					insecure,
				},
				Action: configArtifact,
			},
		},
	})
	return app
}

func load(c *ucli.Context) (*config.Config, airgap.Layout, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, airgap.Layout{}, err
	}
	conf, err := config.Load(config.LoadOptions{Lookup: cli.Lookup(c), WorkDir: wd})
	if err != nil {
		return nil, airgap.Layout{}, cli.UsageError(err)
	}
	return conf, airgap.Layout{Dir: filepath.Join(conf.Root, "airgap")}, nil
}

func check(c *ucli.Context) error {
	conf, layout, err := load(c)
	if err != nil {
		return err
	}
	return airgap.Check(airgap.CheckOptions{Layout: layout, Config: conf, Release: c.Bool("release"), Out: c.App.Writer, Printer: cli.Printer(c, c.App.Writer)})
}

func pin(c *ucli.Context) error {
	_, layout, err := load(c)
	if err != nil {
		return err
	}
	if c.Int("concurrency") < 1 {
		return cli.Usagef("--concurrency must be at least 1")
	}
	return airgap.Pin(c.Context, airgap.PinOptions{
		Layout: layout, Resolver: airgap.RegistryResolver{Insecure: c.Bool("insecure")},
		Refresh: c.Bool("refresh"), DryRun: c.Bool("dry-run"), Concurrency: c.Int("concurrency"), Out: c.App.Writer, Printer: cli.Printer(c, c.App.Writer),
	})
}

func configArtifact(c *ucli.Context) error {
	conf, _, err := load(c)
	if err != nil {
		return err
	}
	if c.NArg() > 1 {
		return cli.Usagef("config takes at most one argument, the reference to push to")
	}
	ref := ""
	if c.Bool("push") {
		ref = airgap.ConfigRepository + ":local-host"
		if c.NArg() == 1 {
			ref = c.Args().First()
		}
	} else if c.NArg() == 1 {
		return cli.Usagef("a reference was given without --push: add --push to push to %s", c.Args().First())
	}
	return airgap.Config(c.Context, airgap.ConfigOptions{
		Root: conf.Root, Paths: c.StringSlice("path"), SyncPath: c.String("sync-path"), Ref: ref,
		Source: c.String("source"), Revision: c.String("revision"), Insecure: c.Bool("insecure"), Out: c.App.Writer, Printer: cli.Printer(c, c.App.Writer),
	})
}
