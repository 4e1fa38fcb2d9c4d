package awsprovider

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Target is one cluster whose AWS footprint krops owns.
type Target struct {
	Cluster string
	Region  string
	// EKSCluster is the EKS name (<namespace>_<control plane>); empty when
	// the cluster is not EKS. EKSKey is the bootstrap.toml key it came from.
	EKSCluster, EKSKey string
	// RDSInstance is the cluster's database, when it has one; RDSKey is the
	// bootstrap.toml key it came from.
	RDSInstance, RDSKey string
	// IAMRolePrefix (mgmt-iam-role-prefix) is never evidence on its own: an
	// IAM name that begins with it, and carries no evidence, is a suspect.
	IAMRolePrefix string
	Management    bool
}

// namePrefixes are the beginnings that make an IAM name without evidence a
// suspect of this cluster: its name, its EKS name, its role prefix.
func (t Target) namePrefixes() []string {
	var out []string
	for _, p := range []string{t.Cluster, t.EKSCluster, t.IAMRolePrefix} {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// ControlPlaneRole is the IAM role CAPA creates for an EKS control plane
// when EKSEnableIAM is on and the AWSManagedControlPlane names no role:
// <cluster>-iam-service-role (CAPA's documented naming).
func (t Target) ControlPlaneRole() string { return t.Cluster + "-iam-service-role" }

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
	// Provider is [providers.aws]: the account-wide names.
	Provider struct {
		Teardown struct {
			CFNStackName    string   `json:"cfn-stack-name"`
			GlobalIAMRoles  []string `json:"global-iam-roles"`
			GlobalIAMUsers  []string `json:"global-iam-users"`
			S3BucketPattern string   `json:"s3-bucket-pattern"`
		} `json:"teardown"`
	} `json:"provider"`
}

// accountID is the form of an AWS account id.
var accountID = regexp.MustCompile(`^[0-9]{12}$`)

// mgmtSuffix ends every management cluster name: the rest is its region.
const mgmtSuffix = "-management"

func parseSettings(cfg sdk.Config) (settings, error) {
	var fc fileConfig
	if err := cfg.Decode(&fc); err != nil {
		return settings{}, err
	}
	e, td := fc.Environment, fc.Provider.Teardown
	s := settings{
		environment: cfg.Environment, cfnStack: td.CFNStackName,
		globalRoles: td.GlobalIAMRoles, globalUsers: td.GlobalIAMUsers,
		bucketPattern: td.S3BucketPattern, allowedAccounts: e.AllowedAccounts,
	}
	if p := td.S3BucketPattern; p != "" {
		for _, ph := range []string{"{account_id}", "{cluster_name}"} {
			if !strings.Contains(p, ph) {
				return settings{}, fmt.Errorf("%w: providers.aws.teardown.s3-bucket-pattern %q lacks the placeholder %s (both {account_id} and {cluster_name} are required, so buckets of other accounts and clusters never match)", sdk.ErrInvalidArgument, p, ph)
			}
		}
	}
	for i, a := range e.AllowedAccounts {
		if !accountID.MatchString(a) {
			return settings{}, fmt.Errorf("%w: environments.%s.allowed-accounts[%d] %q is not an AWS account id (want 12 digits, as a string)", sdk.ErrInvalidArgument, cfg.Environment, i, a)
		}
	}
	if e.MgmtCluster == "" {
		return settings{}, fmt.Errorf("%w: environments.%s.mgmt-cluster is empty", sdk.ErrInvalidArgument, cfg.Environment)
	}
	region, ok := strings.CutSuffix(e.MgmtCluster, mgmtSuffix)
	if !ok || region == "" {
		return settings{}, fmt.Errorf("%w: environments.%s.mgmt-cluster %q must be <region>%s: the aws provider reads the management region from it", sdk.ErrInvalidArgument, cfg.Environment, e.MgmtCluster, mgmtSuffix)
	}
	key := "environments." + cfg.Environment + ".teardown."
	s.targets = append(s.targets, Target{
		Cluster: e.MgmtCluster, Region: region, EKSCluster: e.Teardown.MgmtEKSClusterName, EKSKey: key + "mgmt-eks-cluster-name",
		IAMRolePrefix: e.Teardown.MgmtIAMRolePrefix, Management: true,
	})
	for i, w := range e.Teardown.AWSWorkloads {
		if w.Region == "" || w.ClusterName == "" {
			return settings{}, fmt.Errorf("%w: environments.%s.teardown.aws-workloads[%d] needs region and cluster-name", sdk.ErrInvalidArgument, cfg.Environment, i)
		}
		wk := fmt.Sprintf("%saws-workloads[%d].", key, i)
		s.targets = append(s.targets, Target{Cluster: w.ClusterName, Region: w.Region,
			EKSCluster: w.EKSClusterName, EKSKey: wk + "eks-cluster-name", RDSInstance: w.RDSInstance, RDSKey: wk + "rds-instance"})
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
	return ownerTagPrefix + cluster
}

// Ownership tag keys: CAPA's own, and the cloud-provider key CAPA puts on
// the IAM roles it creates for EKS control planes and node groups. Either,
// with the value "owned", names the cluster that owns a resource.
const (
	ownerTagPrefix      = "sigs.k8s.io/cluster-api-provider-aws/cluster/"
	cloudOwnerTagPrefix = "kubernetes.io/cluster/"
	ownedValue          = "owned"
)

// owners returns the clusters a resource's tags say own it, with the tag
// that says so.
func owners(tags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		if v != ownedValue {
			continue
		}
		for _, prefix := range []string{ownerTagPrefix, cloudOwnerTagPrefix} {
			if c, ok := strings.CutPrefix(k, prefix); ok && c != "" {
				out[c] = k + "=" + v
			}
		}
	}
	return out
}
