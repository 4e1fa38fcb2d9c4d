package awsprovider

import (
	"github.com/kropsdev/krops/plugins/sdk/sweep"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
)

func testSettings() settings {
	return settings{
		targets: []Target{
			{Cluster: "eu-north-1-management", EKSCluster: "default_eu-north-1-management-control-plane", IAMRolePrefix: "eu-north-1-management", Management: true},
			{Cluster: "eu-west-1-workload", EKSCluster: "default_eu-west-1-workload-control-plane"},
		},
		globalRoles: []string{"krops-reader-role"},
	}
}

// Every rule of IAM scope, one case each: only tags, exact names and
// nothing else make a role ours.
func TestIAMVerdict(t *testing.T) {
	s := testSettings()
	exact := s.exactRoleNames()
	owned := func(key string) map[string]string { return map[string]string{key: "owned"} }
	cases := []struct {
		name, role string
		tags       map[string]string
		ours, sus  bool
		cluster    string
		evidence   string
	}{
		{"CAPA's cloud-provider tag", "anything-at-all", owned("kubernetes.io/cluster/eu-west-1-workload"), true, false, "eu-west-1-workload", "tag kubernetes.io/cluster/eu-west-1-workload=owned"},
		{"CAPA's own tag", "x", owned("sigs.k8s.io/cluster-api-provider-aws/cluster/eu-north-1-management"), true, false, "eu-north-1-management", "tag sigs.k8s.io/cluster-api-provider-aws/cluster/eu-north-1-management=owned"},
		{"a tag valued other than owned is no evidence", "x", map[string]string{"kubernetes.io/cluster/eu-west-1-workload": "shared"}, false, false, "", ""},
		{"CAPA's exact control-plane role name", "eu-west-1-workload-iam-service-role", nil, true, false, "eu-west-1-workload", "CAPA's EKS control-plane role"},
		{"an exact global-iam-roles name", "krops-reader-role", nil, true, false, "", "global-iam-roles"},
		{"an exact name claimed by another cluster's tag", "eu-west-1-workload-iam-service-role", owned("kubernetes.io/cluster/other"), false, true, "eu-west-1-workload", "cluster other owns it"},
		{"a target's name prefix alone", "eu-north-1-management-nodes", map[string]string{"team": "x"}, false, true, "eu-north-1-management", "carries no ownership tag"},
		{"an EKS name prefix alone", "default_eu-west-1-workload-control-plane-ng", nil, false, true, "eu-west-1-workload", "carries no ownership tag"},
		{"a prefix collision with another cluster's tag", "eu-west-1-workload-blue-role", owned("kubernetes.io/cluster/eu-west-1-workload-blue"), false, true, "eu-west-1-workload", "cluster eu-west-1-workload-blue owns it"},
		{"tagged for us and for someone else", "x", map[string]string{"kubernetes.io/cluster/eu-west-1-workload": "owned", "kubernetes.io/cluster/other": "owned"}, false, true, "eu-west-1-workload", "contradictory ownership"},
		{"another environment's cluster, nothing like ours", "staging-role", owned("kubernetes.io/cluster/staging"), false, false, "", ""},
		{"unrelated", "unrelated-role", nil, false, false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := s.iamVerdict(tc.role, tc.tags, exact)
			if v.ours != tc.ours || v.suspect != tc.sus || v.cluster != tc.cluster || !strings.Contains(strings.Join(v.evidence, " "), tc.evidence) {
				t.Errorf("verdict %+v; want ours=%t suspect=%t cluster=%q evidence containing %q", v, tc.ours, tc.sus, tc.cluster, tc.evidence)
			}
			if v.ours && v.suspect {
				t.Error("ours and suspect at once")
			}
		})
	}
}

func TestNotFoundOfASubStepIsSuccess(t *testing.T) {
	for _, code := range []string{"InvalidAssociationID.NotFound", "InvalidPermission.NotFound", "Gateway.NotAttached", "NoSuchEntity", "InvalidVpcID.NotFound"} {
		if _, ok := step(apiErr(code)); !ok {
			t.Errorf("%s stopped a deletion", code)
		}
		if a := classify(apiErr(code), deleted); a.Outcome != sweep.Gone {
			t.Errorf("%s classified %v, want gone", code, a.Outcome)
		}
	}
	if a, ok := step(apiErr("UnauthorizedOperation")); ok || a.Outcome != sweep.Failed {
		t.Errorf("an authorisation error must stop the deletion: %+v", a)
	}
	if a := classify(apiErr("DependencyViolation"), deleted); a.Outcome != sweep.Blocked {
		t.Errorf("DependencyViolation: %+v", a)
	}
}

func apiErr(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "test"}
}
