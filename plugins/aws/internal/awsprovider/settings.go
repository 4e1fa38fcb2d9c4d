package awsprovider

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Target is one cluster whose AWS footprint krops owns.
type Target struct {
	Cluster string
	Region  string
	// EKSCluster is the EKS name (<namespace>_<control plane>); empty when
	// the cluster is not EKS.
	EKSCluster string
	// RDSInstance is the cluster's database, when it has one.
	RDSInstance string
	// IAMRolePrefix selects the cluster's IAM roles by name prefix.
	IAMRolePrefix string
	Management    bool
}

// settings are what Configure reads.
type settings struct {
	environment     string
	targets         []Target
	cfnStack        string
	globalRoles     []string
	globalUsers     []string
	bucketPattern   string
	allowedAccounts []string
}

type fileConfig struct {
	Environment struct {
		MgmtCluster     string   `json:"mgmt-cluster"`
		AllowedAccounts []string `json:"allowed-accounts"`
		Teardown        struct {
			AWSWorkloads []struct {
				Region         string `json:"region"`
				ClusterName    string `json:"cluster-name"`
				EKSClusterName string `json:"eks-cluster-name"`
				RDSInstance    string `json:"rds-instance"`
			} `json:"aws-workloads"`
			MgmtEKSClusterName string `json:"mgmt-eks-cluster-name"`
			MgmtIAMRolePrefix  string `json:"mgmt-iam-role-prefix"`
		} `json:"teardown"`
	} `json:"environment"`
	Teardown struct {
		CFNStackName    string   `json:"cfn-stack-name"`
		GlobalIAMRoles  []string `json:"global-iam-roles"`
		GlobalIAMUsers  []string `json:"global-iam-users"`
		S3BucketPattern string   `json:"s3-bucket-pattern"`
	} `json:"teardown"`
}

// mgmtSuffix ends every management cluster name: the rest is its region.
const mgmtSuffix = "-management"

func parseSettings(cfg sdk.Config) (settings, error) {
	var fc fileConfig
	if err := cfg.Decode(&fc); err != nil {
		return settings{}, err
	}
	e := fc.Environment
	s := settings{
		environment: cfg.Environment, cfnStack: fc.Teardown.CFNStackName,
		globalRoles: fc.Teardown.GlobalIAMRoles, globalUsers: fc.Teardown.GlobalIAMUsers,
		bucketPattern: fc.Teardown.S3BucketPattern, allowedAccounts: e.AllowedAccounts,
	}
	if e.MgmtCluster == "" {
		return settings{}, fmt.Errorf("%w: environments.%s.mgmt-cluster is empty", sdk.ErrInvalidArgument, cfg.Environment)
	}
	region, ok := strings.CutSuffix(e.MgmtCluster, mgmtSuffix)
	if !ok || region == "" {
		return settings{}, fmt.Errorf("%w: environments.%s.mgmt-cluster %q must be <region>%s: the aws provider reads the management region from it", sdk.ErrInvalidArgument, cfg.Environment, e.MgmtCluster, mgmtSuffix)
	}
	s.targets = append(s.targets, Target{
		Cluster: e.MgmtCluster, Region: region, EKSCluster: e.Teardown.MgmtEKSClusterName,
		IAMRolePrefix: e.Teardown.MgmtIAMRolePrefix, Management: true,
	})
	for i, w := range e.Teardown.AWSWorkloads {
		if w.Region == "" || w.ClusterName == "" {
			return settings{}, fmt.Errorf("%w: environments.%s.teardown.aws-workloads[%d] needs region and cluster-name", sdk.ErrInvalidArgument, cfg.Environment, i)
		}
		s.targets = append(s.targets, Target{Cluster: w.ClusterName, Region: w.Region, EKSCluster: w.EKSClusterName, RDSInstance: w.RDSInstance})
	}
	return s, nil
}

// regions returns the targets' regions, management region first.
func (s settings) regions() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range s.targets {
		if !seen[t.Region] {
			seen[t.Region] = true
			out = append(out, t.Region)
		}
	}
	return out
}

func (s settings) targetsIn(region string) []Target {
	var out []Target
	for _, t := range s.targets {
		if t.Region == region {
			out = append(out, t)
		}
	}
	return out
}

func (s settings) mgmt() Target { return s.targets[0] }

// bucketName renders the S3 bucket pattern for a cluster.
func (s settings) bucketName(account, cluster string) string {
	if s.bucketPattern == "" {
		return ""
	}
	return strings.NewReplacer("{account_id}", account, "{cluster_name}", cluster).Replace(s.bucketPattern)
}

func sortedUnique(in []string) []string {
	m := map[string]bool{}
	for _, v := range in {
		m[v] = true
	}
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// OwnerTag is the tag CAPA puts on everything it creates for a cluster.
func OwnerTag(cluster string) string {
	return "sigs.k8s.io/cluster-api-provider-aws/cluster/" + cluster
}
