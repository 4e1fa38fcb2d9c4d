package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func awsConfig(t *testing.T, endpoint string, attempts int) aws.Config {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(),
		awsconfig.WithRetryMaxAttempts(attempts),
		awsconfig.WithBaseEndpoint(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestMotoAnswersSTSAndEC2AndResets(t *testing.T) {
	m := Moto(t, MotoOptions{})
	ctx := context.Background()
	cfg := awsConfig(t, m.URL, 1)
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatalf("STS through moto: %v", err)
	}
	if aws.ToString(id.Account) == "" {
		t.Error("no account id")
	}
	ec := ec2.NewFromConfig(cfg)
	vpc, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	countVPCs := func() int {
		out, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Vpcs)
	}
	before := countVPCs()
	if err := m.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if after := countVPCs(); after != before-1 {
		t.Errorf("reset left %d VPCs (had %d including %s)", after, before, aws.ToString(vpc.Vpc.VpcId))
	}
}

func TestRegistryAcceptsAPushAndServesItBack(t *testing.T) {
	reg := Registry(t)
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg.Host+"/krops/config:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("pulled digest %s, pushed %s", d, want)
	}
}

// Helm charts and Flux artifacts are OCI artifacts with their own config and
// layer media types; the registry must store and serve them unchanged.
func TestRegistryServesHelmAndFluxArtifactMediaTypes(t *testing.T) {
	reg := Registry(t)
	for _, a := range []struct{ repo, config, layer string }{
		{"charts/podinfo:6.15.0", "application/vnd.cncf.helm.config.v1+json", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"},
		{"krops:latest", "application/vnd.cncf.flux.config.v1+json", "application/vnd.cncf.flux.content.v1.tar+gzip"},
	} {
		layer, err := random.Layer(512, types.MediaType(a.layer))
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
		if err != nil {
			t.Fatal(err)
		}
		img = mutate.ConfigMediaType(img, types.MediaType(a.config))
		ref, err := name.ParseReference(reg.Host+"/"+a.repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatalf("push %s: %v", a.repo, err)
		}
		got, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("pull %s: %v", a.repo, err)
		}
		m, err := got.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Config.MediaType) != a.config || len(m.Layers) != 1 || string(m.Layers[0].MediaType) != a.layer {
			t.Errorf("%s came back as config %s layers %+v", a.repo, m.Config.MediaType, m.Layers)
		}
	}
}

// upstream counts calls; it stands for any real server in proxy unit tests.
func upstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestThrottleShareIsWithinToleranceAndTheLogIsComplete(t *testing.T) {
	p := NewFaultProxy(t, upstream(t).URL)
	p.Throttle(0.2, "Throttling")
	throttled := 0
	const n = 1000
	for i := range n {
		resp, err := http.Post(p.URL+fmt.Sprintf("/call/%d", i), "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeVpcs&Version=2016-11-15"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest {
			throttled++
		}
	}
	// Binomial(1000, 0.2): mean 200, sd 12.6; ±5 sd.
	if throttled < 137 || throttled > 263 {
		t.Errorf("%d of %d calls throttled, want about 200", throttled, n)
	}
	reqs := p.Requests()
	if len(reqs) != n {
		t.Fatalf("log has %d requests, want %d", len(reqs), n)
	}
	injected := 0
	for i, r := range reqs {
		if r.Path != fmt.Sprintf("/call/%d", i) || r.Action != "DescribeVpcs" || r.Mutating {
			t.Fatalf("log entry %d = %+v", i, r)
		}
		if r.Injected != "" {
			injected++
		}
	}
	if injected != throttled {
		t.Errorf("log marks %d injected faults, clients saw %d", injected, throttled)
	}
}

func TestThrottledAWSCallsAreRetriedBySDKAndWritesCanBeDenied(t *testing.T) {
	m := Moto(t, MotoOptions{})
	p := NewFaultProxy(t, m.URL)
	ctx := context.Background()
	ec := ec2.NewFromConfig(awsConfig(t, p.URL, 10))
	p.Add(Rule{Action: "DescribeVpcs", Times: 2, Status: http.StatusServiceUnavailable, Code: "RequestLimitExceeded"})
	if _, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatalf("two throttles then success must succeed through SDK retries: %v", err)
	}
	if got := strings.Join(p.Actions(), ","); got != "DescribeVpcs,DescribeVpcs,DescribeVpcs" {
		t.Errorf("actions %s", got)
	}
	p.AssertNoMutation(t)

	p.DenyWrites()
	_, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.1.0.0/16")})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDenied" {
		t.Fatalf("CreateVpc through DenyWrites: %v", err)
	}
	if muts := p.Mutations(); len(muts) != 1 || muts[0].Action != "CreateVpc" || muts[0].Service != "ec2" {
		t.Errorf("mutations %+v", muts)
	}
}

func TestHangingOperationHoldsUntilTheClientGivesUp(t *testing.T) {
	p := NewFaultProxy(t, upstream(t).URL)
	p.Add(Rule{Path: "^/slow$", Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/slow", nil)
	start := time.Now()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("a hanging call must not answer")
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Error("the call returned before the client's deadline")
	}
	resp, err := http.Get(p.URL + "/fast")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("other paths are not affected: %v", err)
	}
}

func TestFaultTransportInFrontOfTheAPIServer(t *testing.T) {
	c := APIServer(t, ClusterOptions{})
	p, err := newFaultProxy("https://unused")
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return p.Transport(rt) }
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Fatal(err)
	}
	p.AssertNoMutation(t)
	p.DenyWrites()
	err = cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "denied"}})
	if err == nil {
		t.Fatalf("create through DenyWrites: %v", err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "denied"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the denied namespace exists: %v", err)
	}
	muts := p.Mutations()
	if len(muts) != 1 || muts[0].Action != "POST /api/v1/namespaces" {
		t.Errorf("mutations %+v", muts)
	}
}
