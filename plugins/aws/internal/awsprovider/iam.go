package awsprovider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// IAM is account-wide, so nothing scopes it but evidence. Every role and
// customer-managed policy of the account is read with its tags; a name is
// evidence only when it is exactly one the configuration or CAPA's naming
// derives, or the resource is a member of the configured bootstrap stack
// (cfn_stack.go). A name that merely begins like a target's is a suspect.

// iamConcurrency bounds the tag reads: IAM's request rate is account-wide
// and far lower than EC2's.
const iamConcurrency = 8

// serviceLinkedPath holds roles AWS services create and delete themselves.
const serviceLinkedPath = "/aws-service-role/"

// verdict is what the evidence says about one IAM name.
type verdict struct {
	ours, suspect bool
	cluster       string
	evidence      []string
}

// iamVerdict weighs an IAM resource's tags and name. exact maps the names
// the configuration derives to the evidence they carry ("" cluster for
// account-wide ones).
func (s settings) iamVerdict(name string, tags map[string]string, exact map[string]namedBy) verdict {
	targets := map[string]bool{}
	for _, t := range s.targets {
		targets[t.Cluster] = true
	}
	var mine, others []string
	ownerTags := owners(tags)
	for cluster := range ownerTags {
		if targets[cluster] {
			mine = append(mine, cluster)
		} else {
			others = append(others, cluster)
		}
	}
	sort.Strings(mine)
	sort.Strings(others)
	switch {
	case len(mine) == 1 && len(others) == 0:
		return verdict{ours: true, cluster: mine[0], evidence: []string{"tag " + ownerTags[mine[0]]}}
	case len(mine) > 0:
		// Claimed by a target and by someone else (or by two targets):
		// the evidence contradicts itself, so a person decides.
		return verdict{suspect: true, cluster: mine[0], evidence: []string{
			"tagged as owned by " + strings.Join(append(mine, others...), " and ") + ": contradictory ownership, not ours by evidence, never swept"}}
	}
	if n, ok := exact[name]; ok {
		if len(others) == 0 {
			return verdict{ours: true, cluster: n.cluster, evidence: []string{n.evidence}}
		}
		return verdict{suspect: true, cluster: n.cluster, evidence: []string{
			n.evidence + ", but its tags say cluster " + strings.Join(others, ", ") + " owns it: not ours by evidence"}}
	}
	for _, t := range s.targets {
		for _, prefix := range t.namePrefixes() {
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			why := "name begins with " + prefix + " (cluster " + t.Cluster + ") but carries no ownership tag of it"
			if len(others) > 0 {
				why = "name begins with " + prefix + " (cluster " + t.Cluster + ") but its tags say cluster " + strings.Join(others, ", ") + " owns it"
			}
			return verdict{suspect: true, cluster: t.Cluster, evidence: []string{why + ": not ours by evidence, never swept"}}
		}
	}
	return verdict{}
}

// namedBy is the evidence an exact name carries.
type namedBy struct{ cluster, evidence string }

func (s settings) exactRoleNames() map[string]namedBy {
	out := map[string]namedBy{}
	for _, t := range s.targets {
		if t.EKSCluster != "" {
			out[t.ControlPlaneRole()] = namedBy{t.Cluster, "exact name " + t.ControlPlaneRole() + ": CAPA's EKS control-plane role of cluster " + t.Cluster}
		}
	}
	for _, r := range s.globalRoles {
		out[r] = namedBy{"", "exact name listed in bootstrap.toml [teardown] global-iam-roles"}
	}
	return out
}

func iamTags(tags []iamtypes.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// forEachBounded runs fn for every index with at most n at once (one at a
// time in sequential mode).
func (p *Provider) forEachBounded(count, n int, fn func(i int)) {
	if p.o.Sequential {
		n = 1
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// scanIAM reports the roles, instance profiles, customer-managed policies
// and users that are ours by evidence, and the suspects.
func (p *Provider) scanIAM(ctx context.Context, e *emitter) {
	c, err := p.c.iam(ctx, p.s.mgmt().Region)
	if err != nil {
		for _, k := range []string{KindIAMRole, KindIAMInstanceProfile, KindIAMPolicy, KindIAMUser} {
			e.failed(k, Global, err)
		}
		return
	}
	members, err := p.scanStackMembers(ctx)
	if err != nil {
		// Without the stack's members, some of ours may go unnamed: the
		// kinds it creates are unknown rather than partly listed.
		for _, k := range []string{KindIAMRole, KindIAMInstanceProfile, KindIAMPolicy} {
			e.failed(k, Global, fmt.Errorf("members of CloudFormation stack %s: %w", p.s.cfnStack, err))
		}
		members = stackMembers{}
	}
	roles := p.scanRoles(ctx, c, members, e)
	if roles != nil {
		p.scanInstanceProfiles(ctx, c, roles, members, e)
	}
	users := p.scanUsers(ctx, c, e)
	if roles != nil && users != nil {
		p.scanPolicies(ctx, c, roles, users, members, e)
	} else {
		// Without every role and user, a policy's attachments cannot be
		// weighed: the policies are unknown.
		e.failed(KindIAMPolicy, Global, fmt.Errorf("not listed: the roles or users they attach to could not be read"))
	}
	for _, r := range roles {
		e.resource(*r)
	}
	for _, u := range users {
		e.resource(*u)
	}
}

// scanRoles returns the roles that are ours by name (nil when the roles
// could not be listed); they are emitted after their instance profiles
// are known, which they depend on.
func (p *Provider) scanRoles(ctx context.Context, c *iam.Client, members stackMembers, e *emitter) map[string]*sdk.Resource {
	var all []iamtypes.Role
	pages := iam.NewListRolesPaginator(c, &iam.ListRolesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			e.failed(KindIAMRole, Global, fmt.Errorf("iam ListRoles: %w", err))
			return nil
		}
		for _, r := range page.Roles {
			if !strings.HasPrefix(aws.ToString(r.Path), serviceLinkedPath) {
				all = append(all, r)
			}
		}
	}
	exact := p.s.exactRoleNames()
	for name := range members[cfnIAMRole] {
		if _, named := exact[name]; !named {
			why, _, _ := p.member(members, cfnIAMRole, name)
			exact[name] = namedBy{"", "member " + why}
		}
	}
	verdicts := make([]verdict, len(all))
	tagsOf := make([]map[string]string, len(all))
	failed := make([]error, len(all))
	p.forEachBounded(len(all), iamConcurrency, func(i int) {
		tags, err := roleTags(ctx, c, aws.ToString(all[i].RoleName))
		if err != nil {
			failed[i] = err
			return
		}
		tagsOf[i] = tags
		verdicts[i] = p.s.iamVerdict(aws.ToString(all[i].RoleName), tags, exact)
	})
	ours := map[string]*sdk.Resource{}
	for i, r := range all {
		name := aws.ToString(r.RoleName)
		if failed[i] != nil {
			if apiCode(failed[i]) != "NoSuchEntity" { // deleted since the list: gone
				e.failed(KindIAMRole, Global, fmt.Errorf("tags of role %s: %w", name, failed[i]))
			}
			continue
		}
		v := verdicts[i]
		res := sdk.Resource{Kind: KindIAMRole, ID: name, Region: Global, Cluster: v.cluster, CreatedAt: r.CreateDate, Tags: tagsOf[i], Evidence: v.evidence}
		if _, stack, ok := p.member(members, cfnIAMRole, name); ok {
			res.DependsOn = append(res.DependsOn, stack)
		}
		switch {
		case v.ours:
			ours[name] = &res
		case v.suspect:
			e.suspect(res)
		}
	}
	return ours
}

func roleTags(ctx context.Context, c *iam.Client, role string) (map[string]string, error) {
	tags := map[string]string{}
	pages := iam.NewListRoleTagsPaginator(c, &iam.ListRoleTagsInput{RoleName: aws.String(role)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for k, v := range iamTags(page.Tags) {
			tags[k] = v
		}
	}
	return tags, nil
}

// scanInstanceProfiles reports the profiles that carry one of our roles: a
// confirmed edge. The role then waits for its profile, which is emptied and
// deleted first.
func (p *Provider) scanInstanceProfiles(ctx context.Context, c *iam.Client, roles map[string]*sdk.Resource, members stackMembers, e *emitter) {
	pages := iam.NewListInstanceProfilesPaginator(c, &iam.ListInstanceProfilesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			e.failed(KindIAMInstanceProfile, Global, fmt.Errorf("iam ListInstanceProfiles: %w", err))
			return
		}
		for _, ip := range page.InstanceProfiles {
			name := aws.ToString(ip.InstanceProfileName)
			for _, r := range ip.Roles {
				role, ok := roles[aws.ToString(r.RoleName)]
				if !ok {
					continue
				}
				res := sdk.Resource{Kind: KindIAMInstanceProfile, ID: name, Region: Global, Cluster: role.Cluster, CreatedAt: ip.CreateDate,
					Tags: iamTags(ip.Tags), Evidence: []string{"carries role " + role.ID + ", which is ours by " + strings.Join(role.Evidence, "; ")}}
				if _, stack, ok := p.member(members, cfnIAMInstanceProfile, name); ok {
					res.DependsOn = append(res.DependsOn, stack)
				}
				e.resource(res)
				role.DependsOn = append(role.DependsOn, KindIAMInstanceProfile+"/"+name)
				break
			}
		}
	}
}

// scanUsers looks up the users bootstrap.toml names (nil when a lookup
// failed).
func (p *Provider) scanUsers(ctx context.Context, c *iam.Client, e *emitter) map[string]*sdk.Resource {
	out := map[string]*sdk.Resource{}
	ok := true
	for _, u := range sortedUnique(p.s.globalUsers) {
		got, err := c.GetUser(ctx, &iam.GetUserInput{UserName: aws.String(u)})
		if apiCode(err) == "NoSuchEntity" {
			continue
		}
		if err != nil {
			e.failed(KindIAMUser, Global, fmt.Errorf("iam GetUser %s: %w", u, err))
			ok = false
			continue
		}
		out[u] = &sdk.Resource{Kind: KindIAMUser, ID: u, Region: Global, CreatedAt: got.User.CreateDate, Tags: iamTags(got.User.Tags),
			Evidence: []string{"exact name listed in bootstrap.toml [teardown] global-iam-users"}}
	}
	if !ok {
		return nil
	}
	return out
}

// scanPolicies reports customer-managed policies tagged as owned by a
// target. Such a policy goes after the roles and users of ours it is
// attached to (their deletion detaches it); an attachment to anything else
// is found again at deletion time and stops it there.
func (p *Provider) scanPolicies(ctx context.Context, c *iam.Client, roles, users map[string]*sdk.Resource, members stackMembers, e *emitter) {
	var all []iamtypes.Policy
	pages := iam.NewListPoliciesPaginator(c, &iam.ListPoliciesInput{Scope: iamtypes.PolicyScopeTypeLocal})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			e.failed(KindIAMPolicy, Global, fmt.Errorf("iam ListPolicies: %w", err))
			return
		}
		all = append(all, page.Policies...)
	}
	type found struct {
		v    verdict
		tags map[string]string
		deps []string
		err  error
	}
	results := make([]found, len(all))
	p.forEachBounded(len(all), iamConcurrency, func(i int) {
		arn := all[i].Arn
		tags := map[string]string{}
		tp := iam.NewListPolicyTagsPaginator(c, &iam.ListPolicyTagsInput{PolicyArn: arn})
		for tp.HasMorePages() {
			page, err := tp.NextPage(ctx)
			if err != nil {
				results[i].err = err
				return
			}
			for k, v := range iamTags(page.Tags) {
				tags[k] = v
			}
		}
		// A stack member is named by its ARN (the physical id
		// CloudFormation gives a managed policy).
		var exact map[string]namedBy
		why, stack, member := p.member(members, cfnIAMManagedPolicy, aws.ToString(arn))
		if member {
			exact = map[string]namedBy{aws.ToString(all[i].PolicyName): {"", "member " + why}}
		}
		v := p.s.iamVerdict(aws.ToString(all[i].PolicyName), tags, exact)
		results[i] = found{v: v, tags: tags}
		if member {
			results[i].deps = append(results[i].deps, stack)
		}
		if !v.ours {
			return
		}
		ep := iam.NewListEntitiesForPolicyPaginator(c, &iam.ListEntitiesForPolicyInput{PolicyArn: arn})
		for ep.HasMorePages() {
			page, err := ep.NextPage(ctx)
			if err != nil {
				results[i].err = err
				return
			}
			for _, r := range page.PolicyRoles {
				if _, ok := roles[aws.ToString(r.RoleName)]; ok {
					results[i].deps = append(results[i].deps, KindIAMRole+"/"+aws.ToString(r.RoleName))
				}
			}
			for _, u := range page.PolicyUsers {
				if _, ok := users[aws.ToString(u.UserName)]; ok {
					results[i].deps = append(results[i].deps, KindIAMUser+"/"+aws.ToString(u.UserName))
				}
			}
		}
	})
	for i, pol := range all {
		f := results[i]
		arn := aws.ToString(pol.Arn)
		if f.err != nil {
			if apiCode(f.err) != "NoSuchEntity" {
				e.failed(KindIAMPolicy, Global, fmt.Errorf("policy %s: %w", arn, f.err))
			}
			continue
		}
		res := sdk.Resource{Kind: KindIAMPolicy, ID: arn, Region: Global, Cluster: f.v.cluster, CreatedAt: pol.CreateDate, Tags: f.tags, Evidence: f.v.evidence, DependsOn: f.deps}
		switch {
		case f.v.ours:
			e.resource(res)
		case f.v.suspect:
			e.suspect(res)
		}
	}
}

// step runs one sub-step of a deletion: a NotFound means someone else did
// it already, which is what the step was for.
func step(err error) (sweep.Result, bool) {
	if err == nil || isNotFound(err) {
		return sweep.Result{}, true
	}
	return classify(err, deleted), false
}
