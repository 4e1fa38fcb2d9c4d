package awsprovider

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// clients makes one set of service clients per region, lazily.
type clients struct {
	mu     sync.Mutex
	base   map[string]aws.Config
	http   *http.Client
	maxTry int
}

// retryPolicy: the SDK's adaptive retryer backs off with jitter on
// Throttling, RequestLimitExceeded and 5xx, and rate-limits the client
// itself once AWS starts throttling. 10 attempts ride out minutes-long
// throttling storms on big accounts; a throttled list is retried, never
// treated as empty.
const defaultMaxAttempts = 10

// Per-attempt bounds. The SDK's own client has none after the connection
// is made, so an endpoint that accepts and never answers (a proxy with a
// dead upstream, a half-open VPN) would hang a sweep for as long as its
// context lives. Every call krops makes is a small API request that AWS
// answers in well under a second; half a minute is generous even for a
// throttled page, and the retryer still gets its attempts.
const (
	callTimeout     = 30 * time.Second
	identityTimeout = 10 * time.Second
)

// boundedHTTPClient is the SDK's default transport with a whole-request
// timeout per attempt.
func boundedHTTPClient(timeout time.Duration) aws.HTTPClient {
	return awshttp.NewBuildableClient().WithTimeout(timeout)
}

func newClients(httpClient *http.Client, maxAttempts int) *clients {
	if maxAttempts == 0 {
		maxAttempts = defaultMaxAttempts
	}
	return &clients{base: map[string]aws.Config{}, http: httpClient, maxTry: maxAttempts}
}

// identityClient is the HTTP client for the account lookup that opens every
// operation: identityAttempts tries of identityTimeout each keep an
// unanswering endpoint's verdict under a minute.
func (c *clients) identityClient() aws.HTTPClient {
	if c.http != nil {
		return c.http
	}
	return boundedHTTPClient(identityTimeout)
}

func (c *clients) config(ctx context.Context, region string) (aws.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg, ok := c.base[region]; ok {
		return cfg, nil
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
				o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) { so.MaxAttempts = c.maxTry })
			})
		}),
	}
	if c.http != nil {
		opts = append(opts, config.WithHTTPClient(c.http))
	} else {
		opts = append(opts, config.WithHTTPClient(boundedHTTPClient(callTimeout)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration for %s: %w", region, err)
	}
	c.base[region] = cfg
	return cfg, nil
}

// pathStyle is needed for S3 when an endpoint override (an emulator or a
// proxy) is not a virtual-host-capable name.
func pathStyle() bool {
	return os.Getenv("AWS_ENDPOINT_URL") != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
}

func (c *clients) ec2(ctx context.Context, region string) (*ec2.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return ec2.NewFromConfig(cfg), nil
}

func (c *clients) eks(ctx context.Context, region string) (*eks.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return eks.NewFromConfig(cfg), nil
}

func (c *clients) rds(ctx context.Context, region string) (*rds.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return rds.NewFromConfig(cfg), nil
}

func (c *clients) s3(ctx context.Context, region string) (*s3.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle() }), nil
}

func (c *clients) iam(ctx context.Context, region string) (*iam.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return iam.NewFromConfig(cfg), nil
}

func (c *clients) cfn(ctx context.Context, region string) (*cloudformation.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return cloudformation.NewFromConfig(cfg), nil
}

func (c *clients) quotas(ctx context.Context, region string) (*servicequotas.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return servicequotas.NewFromConfig(cfg), nil
}

func (c *clients) sts(ctx context.Context, region string) (*sts.Client, error) {
	cfg, err := c.config(ctx, region)
	if err != nil {
		return nil, err
	}
	return sts.NewFromConfig(cfg), nil
}
