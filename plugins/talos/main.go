// Command krops-provider-talos is the krops provider plugin for the
// local-talos environment (Talos on Tinkerbell-provisioned bare metal).
package main

import (
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/talos/internal/talos"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	sdk.Serve(talos.New(version), sdk.ServeOptions{})
}
