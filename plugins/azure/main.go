// Command krops-provider-azure is the krops provider plugin for the azure
// environment: preflight, the post-kind-create mise task, and a manual
// teardown policy.
package main

import (
	"github.com/kropsdev/krops/plugins/azure/internal/azure"
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/cloudcli"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	sdk.Serve(cloudcli.New(azure.Spec(), version), sdk.ServeOptions{})
}
