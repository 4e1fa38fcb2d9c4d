// Package awsprovider is the aws provider: preflight of the account and its
// quotas, and read-only discovery of everything krops creates for an aws
// environment (EKS, RDS, CAPA-owned networks, S3, IAM, the CAPA bootstrap
// stack), scoped by the clusters bootstrap.toml names.
package awsprovider

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/duration"
)

// Production polling: look again a second after an asynchronous deletion
// was accepted (NAT gateways and stacks often finish within seconds), then
// back off to every 10 s (EKS and RDS take many minutes).
const (
	DefaultFirstPoll    = time.Second
	DefaultPollInterval = 10 * time.Second
)

// identityAttempts bounds the account lookup that precedes everything.
const identityAttempts = 3

// Quota codes checked by preflight.
const (
	QuotaElasticIPs = "L-0263D0A3" // EC2-VPC Elastic IPs per region
	QuotaVPCs       = "L-F678F1CE" // VPCs per region
	// EIPsPerCluster: CAPA gives each cluster a NAT gateway per AZ (3).
	EIPsPerCluster = 3
)

// Options inject what tests replace; the zero value is production.
type Options struct {
	HTTPClient  *http.Client
	MaxAttempts int
	// Sequential runs every query and deletion one after another: the
	// baseline the benchmarks compare with.
	Sequential bool
	// PollInterval is the longest pause between sweep passes while
	// asynchronous deletions (NAT gateways, EKS, RDS, stacks) finish or
	// dependencies clear; zero means no wait.
	PollInterval time.Duration
	// FirstPoll is the first pause after a deletion was accepted; it
	// doubles up to PollInterval. Zero or more than PollInterval means
	// fixed PollInterval pauses (the benchmark's baseline).
	FirstPoll time.Duration
}

// Provider is the aws provider.
type Provider struct {
	sdk.Unimplemented
	version string
	o       Options
	s       settings
	c       *clients
}

// New returns the provider.
func New(version string, o Options) *Provider {
	return &Provider{version: version, o: o}
}

// Describe declares the provider.
func (p *Provider) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name: "aws", Version: p.version,
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapHooks, sdk.CapPivotInputs, sdk.CapTeardownPolicy, sdk.CapDiscover, sdk.CapSweep},
		Phases:       []sdk.Phase{sdk.PhaseAfterKindCreate},
		ConfigKeys: []string{
			"environments.*.teardown.aws-workloads", "environments.*.teardown.mgmt-eks-cluster-name",
			"environments.*.teardown.mgmt-iam-role-prefix",
			"providers.*.teardown.cfn-stack-name", "providers.*.teardown.global-iam-roles",
			"providers.*.teardown.global-iam-users", "providers.*.teardown.s3-bucket-pattern",
		},
		Env: []string{
			"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
			"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE",
			"AWS_RESPONSE_CHECKSUM_VALIDATION", "AWS_REQUEST_CHECKSUM_CALCULATION",
			PollIntervalEnv,
		},
	}, nil
}

// PollIntervalEnv overrides the longest pause between sweep passes while
// asynchronous deletions finish (duration grammar; 0 for emulators).
const PollIntervalEnv = "KROPS_AWS_POLL_INTERVAL"

// Configure reads the targets.
func (p *Provider) Configure(_ context.Context, cfg sdk.Config) error {
	s, err := parseSettings(cfg)
	if err != nil {
		return err
	}
	if v := cfg.Env[PollIntervalEnv]; v != "" {
		d, err := duration.Parse(v)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", sdk.ErrInvalidArgument, PollIntervalEnv, err)
		}
		p.o.PollInterval = d
	}
	p.s = s
	p.c = newClients(p.o.HTTPClient, p.o.MaxAttempts)
	return nil
}

func (p *Provider) configured() error {
	if p.c == nil {
		return fmt.Errorf("%w: the aws provider was not configured", sdk.ErrInvalidArgument)
	}
	return nil
}

// account returns the caller's account id.
func (p *Provider) account(ctx context.Context) (string, error) {
	c, err := p.c.sts(ctx, p.s.mgmt().Region)
	if err != nil {
		return "", err
	}
	// A few attempts only: an endpoint that refuses connections or
	// credentials that do not work will not mend within the retryer's
	// minutes of backoff, and the user should hear it at once.
	out, err := c.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.Options) {
		o.Retryer = retry.AddWithMaxAttempts(o.Retryer, identityAttempts)
		o.HTTPClient = p.c.identityClient()
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if endpoint, silent := unansweredEndpoint(err); endpoint != "" {
			if silent {
				return "", fmt.Errorf("the AWS endpoint %s did not answer (sts GetCallerIdentity, %d attempts of %s): nothing was read or changed; check AWS_ENDPOINT_URL, the proxy (HTTPS_PROXY) and the network, then rerun: %w",
					endpoint, identityAttempts, identityTimeout, sdk.ErrUnknownState)
			}
			return "", fmt.Errorf("could not reach the AWS endpoint %s (sts GetCallerIdentity): %v; nothing was read or changed; check AWS_ENDPOINT_URL, the proxy (HTTPS_PROXY) and the network, then rerun: %w",
				endpoint, rootCause(err), sdk.ErrUnknownState)
		}
		return "", fmt.Errorf("could not read the AWS account (sts GetCallerIdentity): %w; check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and AWS_ENDPOINT_URL: %w", err, sdk.ErrUnknownState)
	}
	return aws.ToString(out.Account), nil
}

// checkedAccount returns the account, refusing any outside the allow-list
// before anything else is called.
func (p *Provider) checkedAccount(ctx context.Context) (string, error) {
	if err := p.configured(); err != nil {
		return "", err
	}
	account, err := p.account(ctx)
	if err != nil {
		return "", err
	}
	if len(p.s.allowedAccounts) > 0 && !slices.Contains(p.s.allowedAccounts, account) {
		return "", fmt.Errorf("AWS account %s is not in environments.%s.allowed-accounts [%s]: nothing was read or changed; select an allowed account (AWS_PROFILE or credentials) or add this one to the list: %w",
			account, p.s.environment, strings.Join(p.s.allowedAccounts, ", "), sdk.ErrRefused)
	}
	return account, nil
}

// TeardownPolicy: the management cluster is deleted through CAPA, a
// cloud-only sweep (AWS_ONLY=1) is allowed as a recovery path, and the
// controllers' credentials go with the controllers.
func (p *Provider) TeardownPolicy(context.Context) (sdk.TeardownPolicy, error) {
	return sdk.TeardownPolicy{HostRemoval: sdk.RemoveByDeletingCluster, CloudOnlySweepAllowed: true,
		Secrets: []string{CAPANamespace + "/" + CredentialsName, ACKNamespace + "/" + CredentialsName}}, nil
}

// Preflight checks the account and, per region, the Elastic IP and VPC
// quotas against what the environment's clusters need. Resources these
// clusters already own count as available, so a rerun after a partial run
// passes. Every short region is reported with the command that raises it.
func (p *Provider) Preflight(ctx context.Context) ([]sdk.Check, error) {
	if err := p.configured(); err != nil {
		return nil, err
	}
	account, err := p.checkedAccount(ctx)
	if err != nil {
		return []sdk.Check{{Name: "AWS account", Message: err.Error(), Remedy: "select the right account with AWS_PROFILE or credentials"}}, nil
	}
	checks := []sdk.Check{{Name: "AWS account", OK: true, Message: account}}
	for _, region := range p.s.regions() {
		checks = append(checks, p.quotaChecks(ctx, region)...)
	}
	return checks, nil
}

func (p *Provider) quotaChecks(ctx context.Context, region string) []sdk.Check {
	targets := p.s.targetsIn(region)
	var names []string
	for _, t := range targets {
		names = append(names, t.Cluster)
	}
	unknown := func(name string, err error) sdk.Check {
		return sdk.Check{Name: name, Message: "could not check: " + err.Error(), Remedy: "fix the error above and rerun; the quota is unknown, not sufficient"}
	}
	ec, err := p.c.ec2(ctx, region)
	if err != nil {
		return []sdk.Check{unknown("quotas in "+region, err)}
	}
	sq, err := p.c.quotas(ctx, region)
	if err != nil {
		return []sdk.Check{unknown("quotas in "+region, err)}
	}
	var checks []sdk.Check

	eipName := "Elastic IPs in " + region
	limit, err := quota(ctx, sq, "ec2", QuotaElasticIPs)
	if err != nil {
		checks = append(checks, unknown(eipName, err))
	} else if allocated, owned, err := p.countEIPs(ctx, ec, targets); err != nil {
		checks = append(checks, unknown(eipName, err))
	} else {
		checks = append(checks, quotaCheck(eipName, "ec2", QuotaElasticIPs, region, limit, allocated, owned, EIPsPerCluster*len(targets), names))
	}

	vpcName := "VPCs in " + region
	limit, err = quota(ctx, sq, "vpc", QuotaVPCs)
	if err != nil {
		checks = append(checks, unknown(vpcName, err))
	} else if allocated, owned, err := p.countVPCs(ctx, ec, targets); err != nil {
		checks = append(checks, unknown(vpcName, err))
	} else {
		checks = append(checks, quotaCheck(vpcName, "vpc", QuotaVPCs, region, limit, allocated, owned, len(targets), names))
	}
	return checks
}

func quota(ctx context.Context, c *servicequotas.Client, service, code string) (int, error) {
	out, err := c.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String(service), QuotaCode: aws.String(code)})
	if err != nil {
		return 0, fmt.Errorf("service-quotas %s %s: %w", service, code, err)
	}
	return int(aws.ToFloat64(out.Quota.Value)), nil
}

// quotaCheck applies available = limit - max(0, allocated - owned).
func quotaCheck(name, service, code, region string, limit, allocated, owned, required int, clusters []string) sdk.Check {
	foreign := max(0, allocated-owned)
	available := limit - foreign
	msg := fmt.Sprintf("need %d for %s; quota %d, %d used by others, %d already ours", required, strings.Join(clusters, ", "), limit, foreign, owned)
	if available >= required {
		return sdk.Check{Name: name, OK: true, Message: msg}
	}
	return sdk.Check{Name: name, OK: false, Message: msg + fmt.Sprintf("; short by %d", required-available),
		Remedy: fmt.Sprintf("aws service-quotas request-service-quota-increase --service-code %s --quota-code %s --desired-value %d --region %s", service, code, foreign+required, region)}
}

func (p *Provider) countEIPs(ctx context.Context, c *ec2.Client, targets []Target) (allocated, owned int, err error) {
	out, err := c.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []ec2types.Filter{filter("domain", "vpc")}})
	if err != nil {
		return 0, 0, fmt.Errorf("ec2 DescribeAddresses: %w", err)
	}
	mine := map[string]bool{}
	for _, t := range targets {
		o, err := c.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []ec2types.Filter{filter("domain", "vpc"), filter("tag:"+OwnerTag(t.Cluster), "owned")}})
		if err != nil {
			return 0, 0, fmt.Errorf("ec2 DescribeAddresses for %s: %w", t.Cluster, err)
		}
		for _, a := range o.Addresses {
			mine[aws.ToString(a.AllocationId)] = true
		}
	}
	return len(out.Addresses), len(mine), nil
}

func (p *Provider) countVPCs(ctx context.Context, c *ec2.Client, targets []Target) (allocated, owned int, err error) {
	all := 0
	pages := ec2.NewDescribeVpcsPaginator(c, &ec2.DescribeVpcsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("ec2 DescribeVpcs: %w", err)
		}
		all += len(page.Vpcs)
	}
	mine := map[string]bool{}
	for _, t := range targets {
		pages := ec2.NewDescribeVpcsPaginator(c, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{filter("tag:"+OwnerTag(t.Cluster), "owned")}})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return 0, 0, fmt.Errorf("ec2 DescribeVpcs for %s: %w", t.Cluster, err)
			}
			for _, v := range page.Vpcs {
				mine[aws.ToString(v.VpcId)] = true
			}
		}
	}
	return all, len(mine), nil
}
