package awsprovider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/plugins/sdk"
)

// The objects the aws tree's controllers read (mgmt/aws): CAPA's operator
// configSecret, the ACK controllers' shared-credentials file, and the
// account values Flux substitutes into mgmt/aws/ack.
const (
	CAPANamespace   = "capa-system"
	ACKNamespace    = "ack-system"
	FluxNamespace   = "flux-system"
	CredentialsName = "aws-credentials"
	ClusterVarsName = "cluster-vars"
	// CAPACredentialsKey holds the credentials in clusterawsadm's
	// `bootstrap credentials encode-as-profile` form: a base64 shared
	// credentials file, which the operator passes to CAPA's manager.
	CAPACredentialsKey = "AWS_B64ENCODED_CREDENTIALS"
	// ACKCredentialsKey holds the shared-credentials file itself.
	ACKCredentialsKey = "credentials"
)

// Hook: after kind is created, the host applies the controllers' objects
// there, before Flux installs CAPA and ACK.
func (p *Provider) Hook(ctx context.Context, req sdk.HookRequest) (sdk.HookResult, error) {
	if req.Phase != sdk.PhaseAfterKindCreate {
		return sdk.HookResult{}, fmt.Errorf("%w: the aws provider has no %s hook", sdk.ErrInvalidArgument, req.Phase)
	}
	objs, account, err := p.controllerObjects(ctx)
	if err != nil {
		return sdk.HookResult{}, err
	}
	return sdk.HookResult{Manifests: objs, Messages: []string{
		fmt.Sprintf("credentials for CAPA (%s/%s) and ACK (%s/%s), account %s (%s/%s)", CAPANamespace, CredentialsName, ACKNamespace, CredentialsName, account, FluxNamespace, ClusterVarsName),
	}}, nil
}

// PivotInputs: the same objects on the management cluster before the move
// (its CAPA and ACK take over from kind's). A question about another
// cluster's endpoint gets no manifests: EKS endpoints are reachable as
// recorded.
func (p *Provider) PivotInputs(ctx context.Context, req sdk.PivotInputsRequest) (sdk.PivotInputs, error) {
	if req.Cluster != "" {
		return sdk.PivotInputs{}, nil
	}
	objs, _, err := p.controllerObjects(ctx)
	if err != nil {
		return sdk.PivotInputs{}, err
	}
	return sdk.PivotInputs{Manifests: objs}, nil
}

// controllerObjects builds the manifests from the default credential chain
// (environment, shared config and AWS_PROFILE, SSO, session tokens) of the
// management cluster's region, for an allowed account only.
func (p *Provider) controllerObjects(ctx context.Context) ([][]byte, string, error) {
	account, err := p.checkedAccount(ctx)
	if err != nil {
		return nil, "", err
	}
	region := p.s.mgmt().Region
	cfg, err := p.c.config(ctx, region)
	if err != nil {
		return nil, "", err
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		// The provider's error names the source, never a key.
		return nil, "", fmt.Errorf("reading the AWS credentials for the controllers: %w", err)
	}
	ini := SharedCredentials(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken, region)
	docs := []any{
		namespace(CAPANamespace), namespace(ACKNamespace), namespace(FluxNamespace),
		secret(CAPANamespace, CredentialsName, map[string]string{CAPACredentialsKey: base64.StdEncoding.EncodeToString([]byte(ini))}),
		secret(ACKNamespace, CredentialsName, map[string]string{ACKCredentialsKey: ini}),
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": ClusterVarsName, "namespace": FluxNamespace, "labels": managedBy},
			"data":     map[string]any{"AWS_ACCOUNT_ID": account, "AWS_REGION": region}},
	}
	var out []string
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, "", err
		}
		out = append(out, string(b))
	}
	return [][]byte{[]byte(strings.Join(out, "---\n"))}, account, nil
}

// SharedCredentials is a shared-credentials file with one default profile,
// the form both clusterawsadm's encode-as-profile and ACK read.
func SharedCredentials(accessKey, secretKey, sessionToken, region string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\nregion = %s\n", accessKey, secretKey, region)
	if sessionToken != "" {
		fmt.Fprintf(&b, "aws_session_token = %s\n", sessionToken)
	}
	return b.String()
}

var managedBy = map[string]any{"app.kubernetes.io/managed-by": "krops"}

func namespace(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
}

func secret(ns, name string, data map[string]string) map[string]any {
	sd := map[string]any{}
	for k, v := range data {
		sd[k] = v
	}
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": managedBy},
		"stringData": sd}
}
