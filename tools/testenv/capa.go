package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// HowToGetCAPA is the hint shown when the CAPA manager is missing.
const HowToGetCAPA = "run `tools/task.sh test:capa` (it builds the manager with tools/testbin/capa.sh; plain `go test -tags capa` then finds it), or set KROPS_CAPA_BIN to the directory tools/testbin/capa.sh prints"

// CAPAOptions configure RunCAPA.
type CAPAOptions struct {
	// Endpoint receives every AWS call CAPA makes (moto, or a FaultProxy
	// in front of it).
	Endpoint string
	// Region is the signing region the endpoint is declared for: the
	// region of the clusters the test creates.
	Region string
	// CredentialsFile is a shared-credentials file: in a cluster, the
	// Cluster API operator puts the decoded AWS_B64ENCODED_CREDENTIALS of
	// the provider's configSecret into CAPA's bootstrap-credentials Secret,
	// mounted as the manager's AWS_SHARED_CREDENTIALS_FILE.
	CredentialsFile string
}

// capaServices are the AWS services CAPA v2.13 sends through
// --service-endpoints (its own names, as its flag parser takes them).
var capaServices = []string{"ec2", "elasticloadbalancing", "eks", "sts", "tagging", "s3", "ssm", "secretsmanager", "sqs", "events"}

// RunCAPA starts the Cluster API Provider AWS manager (KROPS_CAPA_BIN, built
// by tools/testbin/capa.sh) against c and stops it in t.Cleanup. c must be
// started with Webhooks and hold the CAPICore and CAPA CRDs, with the core
// manager running (it sets the owner references CAPA waits for). Its
// admission webhooks are registered, so AWS kinds are defaulted and
// validated for real.
//
// Every AWS call goes to o.Endpoint: the services CAPA names through
// --service-endpoints, and the others (IAM) through AWS_ENDPOINT_URL,
// which also keeps anything CAPA resolves later off the real AWS. Only the
// credentials file gives it credentials: the test's own AWS_* variables
// are blanked.
func RunCAPA(t testing.TB, c *Cluster, o CAPAOptions) *Controllers {
	t.Helper()
	dir := binDir(t, "KROPS_CAPA_BIN", "the Cluster API Provider AWS manager", HowToGetCAPA)
	if c.WebhookCertDir == "" {
		t.Fatal("RunCAPA needs a Cluster started with ClusterOptions.Webhooks")
	}
	ctx := context.Background()
	labelContracts(t, ctx, c)
	endpoints := make([]string, len(capaServices))
	for i, s := range capaServices {
		endpoints[i] = s + "=" + o.Endpoint
	}
	awsConfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(awsConfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	webhookPort := port(t)
	diagnostics := "127.0.0.1:" + strconv.Itoa(port(t))
	ctls := run(t, c, []controller{{
		name: "capa-manager", bin: filepath.Join(dir, "capa-manager"),
		args: func(h string) []string {
			return []string{"--leader-elect=false", "--health-addr=" + h, "--diagnostics-address=" + diagnostics, "--insecure-diagnostics",
				"--webhook-port=" + strconv.Itoa(webhookPort), "--webhook-cert-dir=" + c.WebhookCertDir,
				"--service-endpoints=" + o.Region + ":" + strings.Join(endpoints, ","),
				// Requeue quickly: the test waits on what CAPA makes in moto.
				"--wait-infra-period=2s", "--v=2"}
		},
		env: []string{"AWS_SHARED_CREDENTIALS_FILE=" + o.CredentialsFile, "AWS_CONFIG_FILE=" + awsConfig, "AWS_PROFILE=",
			"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_REGION=" + o.Region,
			"AWS_ENDPOINT_URL=" + o.Endpoint, "AWS_EC2_METADATA_DISABLED=true"},
	}})
	registerWebhooks(t, ctx, c, filepath.Join(dir, "webhooks.yaml"), "capa-", "https://127.0.0.1:"+strconv.Itoa(webhookPort))
	return ctls
}
