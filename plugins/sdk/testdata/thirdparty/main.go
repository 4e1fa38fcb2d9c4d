// Command krops-provider-acme is a provider written outside the krops
// repository, the way a third party would: it imports only the SDK's public
// packages. The SDK's own tests build it in a module of its own and run the
// conformance suite against the binary.
package main

import (
	"context"

	"github.com/kropsdev/krops/plugins/sdk"
)

type acme struct {
	sdk.Unimplemented
	region string
}

func (a *acme) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name:         "acme",
		Version:      "0.1.0",
		Capabilities: []sdk.Capability{sdk.CapPreflight},
		Env:          []string{"ACME_REGION"},
	}, nil
}

func (a *acme) Configure(_ context.Context, cfg sdk.Config) error {
	a.region = cfg.Env["ACME_REGION"]
	return nil
}

func (a *acme) Preflight(context.Context) ([]sdk.Check, error) {
	if a.region == "" {
		return []sdk.Check{{Name: "region", Message: "ACME_REGION is not set", Remedy: "export ACME_REGION"}}, nil
	}
	return []sdk.Check{{Name: "region", OK: true, Message: "region " + a.region}}, nil
}

func main() {
	sdk.Serve(&acme{}, sdk.ServeOptions{})
}
