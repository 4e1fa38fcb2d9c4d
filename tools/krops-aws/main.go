// Command krops-aws does what an AWS account needs before the aws
// environment's first bootstrap, and what the original lifecycle did with
// clusterawsadm: the IAM CloudFormation stack CAPA needs (bootstrap), and
// the controllers' credentials in CAPA's encoded form (credentials).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/krops-aws/internal/iamstack"
	"github.com/kropsdev/krops/tools/krops-aws/internal/inputs"
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
		Name:  "krops-aws",
		Usage: "prepare an AWS account for the aws environment: CAPA's IAM stack, the controllers' encoded credentials",
		Description: `Both commands take the environment (default: KROPS_PROFILE, then bootstrap.toml's default) and read the AWS
credentials through the aws provider plugin, from the default chain (AWS_PROFILE, environment, SSO, session tokens),
for an account in environments.<env>.allowed-accounts only; the region is the management cluster's.

bootstrap creates or updates the CloudFormation stack of IAM roles, policies and instance profiles that Cluster API
Provider AWS needs (what ` + "`clusterawsadm bootstrap iam create-cloudformation-stack`" + ` makes, from CAPA's own template at
the version the trees pin), named by [providers.aws.teardown] cfn-stack-name, the name the teardown deletes it by.
It needs allowed-accounts set: the roles are account-wide. An existing stack changes only through a change set
whose changes are printed first; --dry-run prints them, or for a new stack its resources, and the template, and
changes nothing.

credentials prints which account and region the controllers' credentials are for, never the keys; --write FILE writes them
(0600) in clusterawsadm's encode-as-profile form, the value of AWS_B64ENCODED_CREDENTIALS.

Exit codes: 0 done (or nothing to change); 1 a failure; 2 configuration or refusal (an account outside
allowed-accounts, no allowed-accounts for bootstrap, a stack in a state that cannot be updated); 3 unknown state (the
stack's state could not be read, or it had not settled within the timeout).`,
		Version: version,
		Knobs:   []string{"KROPS_PROFILE", "BOOTSTRAP_CONFIG"},
		Commands: []*ucli.Command{
			{Name: "bootstrap", ArgsUsage: "[ENV]", Action: bootstrapAction,
				Usage: "create or update CAPA's IAM CloudFormation stack in the environment's account",
				Flags: []ucli.Flag{
					&ucli.BoolFlag{Name: "dry-run", Usage: "print what would be created or changed, and the template; change nothing"},
					&ucli.DurationFlag{Name: "timeout", Value: iamstack.Timeout, Usage: "how long to wait for the stack to settle"},
				}},
			{Name: "credentials", ArgsUsage: "[ENV]", Action: credentialsAction,
				Usage: "say whose credentials the controllers get; --write FILE writes them encoded (0600)",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "write", Usage: "write the encoded credentials (AWS_B64ENCODED_CREDENTIALS's value) to `FILE`, mode 0600"},
				}},
		},
	})
}

// session is an aws environment, its provider plugin and what the plugin
// supplies for the controllers.
type session struct {
	sel    *cli.Selected
	inputs inputs.Controllers
	// allowed is environments.<env>.allowed-accounts; stack is
	// [providers.aws.teardown] cfn-stack-name.
	allowed []string
	stack   string
}

// open selects the environment, refuses one that is not aws's, and asks the
// plugin for the controllers' objects: the plugin reads the credentials
// chain and checks the account.
func open(c *ucli.Context) (*session, error) {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return nil, err
	}
	if p := sel.Environment.Provider; p != "aws" {
		return nil, cli.Usagef("environment %s uses provider %s: krops-aws works on environments whose provider is aws", sel.Environment.Name, p)
	}
	raw, err := sel.Config.ProviderJSON(sel.Environment.Name)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	var keys struct {
		Environment struct {
			AllowedAccounts []string `json:"allowed-accounts"`
		} `json:"environment"`
		Provider struct {
			Teardown struct {
				CFNStackName string `json:"cfn-stack-name"`
			} `json:"teardown"`
		} `json:"provider"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, fmt.Errorf("reading the aws settings of environment %s: %w", sel.Environment.Name, err)
	}
	provider, err := pluginhost.Load(c.Context, pluginhost.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")})
	if err != nil {
		return nil, err
	}
	defer provider.Close()
	if !provider.Description().Has(sdk.CapPivotInputs) {
		return nil, fmt.Errorf("provider %s supplies no credentials for its controllers (no %s capability): is KROPS_PLUGIN_DIR or [providers.aws] path a krops aws plugin?", provider.Name, sdk.CapPivotInputs)
	}
	in, err := provider.PivotInputs(c.Context, sdk.PivotInputsRequest{InToolbox: sel.Knobs.Toolbox})
	if err != nil {
		return nil, err
	}
	ctl, err := inputs.Parse(in.Manifests)
	if err != nil {
		return nil, err
	}
	return &session{sel: sel, inputs: ctl, allowed: keys.Environment.AllowedAccounts, stack: keys.Provider.Teardown.CFNStackName}, nil
}

func bootstrapAction(c *ucli.Context) error {
	s, err := open(c)
	if err != nil {
		return err
	}
	env := s.sel.Environment.Name
	file := s.sel.Config.Path
	switch {
	case len(s.allowed) == 0:
		return cli.Usagef("environment %s has no allowed-accounts in %s: the stack's IAM roles are account-wide, so krops-aws bootstrap makes them only in an account you listed. Add [environments.%s] allowed-accounts = [\"%s\"] if account %s is the one",
			env, file, env, s.inputs.Account, s.inputs.Account)
	case !slices.Contains(s.allowed, s.inputs.Account):
		// The plugin refuses this already; kept for a plugin that does not.
		return cli.Usagef("AWS account %s is not in environments.%s.allowed-accounts %v (%s): nothing was changed", s.inputs.Account, env, s.allowed, file)
	case s.stack == "":
		return cli.Usagef("[providers.aws.teardown] cfn-stack-name is empty in %s: name the stack (clusterawsadm's is cluster-api-provider-aws-sigs-k8s-io), the name the teardown deletes it by", file)
	}
	cfg, err := awsconfig.LoadDefaultConfig(c.Context, awsconfig.WithRegion(s.inputs.Region))
	if err != nil {
		return fmt.Errorf("loading the AWS configuration for %s: %w", s.inputs.Region, err)
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	res, err := iamstack.Apply(c.Context, iamstack.Options{
		Client: cloudformation.NewFromConfig(cfg), Stack: s.stack, Template: iamstack.Template,
		Account: s.inputs.Account, Region: s.inputs.Region, DryRun: c.Bool("dry-run"), Timeout: c.Duration("timeout"),
		Progress: prog, Out: c.App.Writer,
	})
	switch {
	case errors.Is(err, iamstack.ErrRefused):
		return cli.UsageError(err)
	case errors.Is(err, iamstack.ErrUnknown):
		return cli.UnknownStateError(err)
	case err != nil:
		return err
	}
	switch res.Action {
	case "created", "updated":
		prog.Successf("stack %s %s in account %s, region %s (%d changes): CAPA can run there; next `task bootstrap ENV=%s`", s.stack, res.Action, s.inputs.Account, s.inputs.Region, len(res.Changes), env)
	case "unchanged":
		prog.Successf("stack %s: nothing to change", s.stack)
	}
	return nil
}

func credentialsAction(c *ucli.Context) error {
	s, err := open(c)
	if err != nil {
		return err
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	fmt.Fprintf(c.App.Writer, "account %s, region %s: the controllers (CAPA, ACK) get the credentials the default chain finds now\n", s.inputs.Account, s.inputs.Region)
	path := c.String("write")
	if path == "" {
		fmt.Fprintln(c.App.Writer, "The keys are not shown: --write FILE writes them encoded (AWS_B64ENCODED_CREDENTIALS's value), mode 0600.")
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(wd, path)
	}
	if err := inputs.WritePrivate(path, []byte(s.inputs.Encoded)); err != nil {
		return err
	}
	prog.Successf("wrote %s (0600): AWS_B64ENCODED_CREDENTIALS's value for account %s; keep it out of git", path, s.inputs.Account)
	return nil
}
