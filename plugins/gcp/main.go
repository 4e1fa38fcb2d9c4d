// Command krops-provider-gcp is the krops provider plugin for the gcp
// environment: preflight, the post-kind-create mise task, and a manual
// teardown policy.
package main

import (
	"github.com/kropsdev/krops/plugins/gcp/internal/gcp"
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/cloudcli"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	sdk.Serve(cloudcli.New(gcp.Spec(), version), sdk.ServeOptions{})
}
