// Command krops-provider-jsoncloud serves the example jsoncloud provider
// (package jsoncloud) as a krops provider plugin.
package main

import (
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/examples/jsoncloud"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	sdk.Serve(jsoncloud.New(version), sdk.ServeOptions{})
}
