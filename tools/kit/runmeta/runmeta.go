// Package runmeta computes the four run tags that krops stamps on every cloud
// resource of a run (through the krops-run ConfigMap Flux substitutes from),
// so orphan reports can group leftovers by run and flag expired ones.
package runmeta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kropsdev/krops/plugins/sdk/duration"
)

// ConfigMap keys, equal to the environment variables that override them.
const (
	KeyRunID     = "KROPS_RUN_ID"
	KeyRevision  = "KROPS_REVISION"
	KeyExpiresAt = "KROPS_EXPIRES_AT"
	KeyRunKind   = "KROPS_RUN_KIND"
)

// ConfigMapName is the ConfigMap in the Flux namespace holding the tags.
const ConfigMapName = "krops-run"

// LabelEnvironment on the krops-run ConfigMap names the environment whose
// run it is: every environment shares the kind cluster's and the management
// cluster's default names, so a teardown tells its own host from another
// environment's by this label. A label, not a data key, because the data is
// what Flux substitutes into the trees.
const LabelEnvironment = "krops.io/environment"

// Never is the expiry of a run whose TTL is "none".
const Never = "never"

// DefaultTTL applies when KROPS_RUN_TTL is unset.
const DefaultTTL = 24 * time.Hour

// Unknown is the revision when none is given or discoverable.
const Unknown = "unknown"

// maxExpiry is the last instant RFC 3339 can write with a four-digit year.
var maxExpiry = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// Tags are one run's tags.
type Tags struct {
	RunID     string
	Revision  string
	ExpiresAt string
	RunKind   string
}

// TTL is a parsed KROPS_RUN_TTL: a duration, or never expiring.
type TTL struct {
	Duration time.Duration
	Never    bool
}

// ParseTTL parses KROPS_RUN_TTL: empty means 24h, `none` means never,
// otherwise the duration grammar (unsigned whole seconds, optionally with s, m
// or h). Negative, fractional and compound values are rejected.
func ParseTTL(s string) (TTL, error) {
	t := strings.TrimSpace(s)
	switch t {
	case "":
		return TTL{Duration: DefaultTTL}, nil
	case "none":
		return TTL{Never: true}, nil
	}
	d, err := duration.Parse(t)
	if err != nil {
		return TTL{}, fmt.Errorf("KROPS_RUN_TTL=%q is not valid: want %s, or none", s, duration.Grammar)
	}
	return TTL{Duration: d}, nil
}

// ExpiresAt returns the expiry tag for a run starting at now.
func (t TTL) ExpiresAt(now time.Time) (string, error) {
	if t.Never {
		return Never, nil
	}
	now = now.UTC().Truncate(time.Second)
	if t.Duration > maxExpiry.Sub(now) {
		return "", fmt.Errorf("a run TTL of %v from %s expires after year 9999: use a shorter TTL or none", t.Duration, now.Format(time.RFC3339))
	}
	return now.Add(t.Duration).Format(time.RFC3339), nil
}

// Options are the inputs of New. Empty strings mean "not given".
type Options struct {
	Environment string
	Now         time.Time
	RunID       string
	Revision    string
	TTL         string
	RunKind     string
	// DiscoverRevision finds the deployed revision when none is given (for
	// example the Git branch head); nil, an error or an empty answer give
	// "unknown".
	DiscoverRevision func(context.Context) (string, error)
}

// New computes fresh tags, honouring every override.
func New(ctx context.Context, o Options) (Tags, error) {
	if o.Environment == "" {
		return Tags{}, errors.New("run tags need the environment name")
	}
	ttl, err := ParseTTL(o.TTL)
	if err != nil {
		return Tags{}, err
	}
	expires, err := ttl.ExpiresAt(o.Now)
	if err != nil {
		return Tags{}, err
	}
	t := Tags{
		RunID:     strings.TrimSpace(o.RunID),
		Revision:  strings.TrimSpace(o.Revision),
		ExpiresAt: expires,
		RunKind:   strings.TrimSpace(o.RunKind),
	}
	if t.RunID == "" {
		t.RunID = DefaultRunID(o.Environment, o.Now)
	}
	if err := CheckRunID(t.RunID); err != nil {
		return Tags{}, err
	}
	if t.Revision == "" && o.DiscoverRevision != nil {
		if rev, err := o.DiscoverRevision(ctx); err == nil {
			t.Revision = strings.TrimSpace(rev)
		}
	}
	if t.Revision == "" {
		t.Revision = Unknown
	}
	if t.RunKind == "" {
		t.RunKind = "manual"
	}
	return t, nil
}

// Data is the krops-run ConfigMap data for the tags.
func (t Tags) Data() map[string]string {
	return map[string]string{
		KeyRunID:     t.RunID,
		KeyRevision:  t.Revision,
		KeyExpiresAt: t.ExpiresAt,
		KeyRunKind:   t.RunKind,
	}
}

// FromData reads tags back from krops-run ConfigMap data, which must hold
// exactly the four keys, each non-empty: anything else means the ConfigMap was
// edited by hand or written by something else, and reusing it would stamp
// wrong tags on a whole run's resources.
func FromData(data map[string]string) (Tags, error) {
	var problems []string
	for _, k := range []string{KeyRunID, KeyRevision, KeyExpiresAt, KeyRunKind} {
		if strings.TrimSpace(data[k]) == "" {
			problems = append(problems, fmt.Sprintf("key %s is missing or empty", k))
		}
	}
	var extra []string
	for k := range data {
		switch k {
		case KeyRunID, KeyRevision, KeyExpiresAt, KeyRunKind:
		default:
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		problems = append(problems, fmt.Sprintf("unexpected key %s", k))
	}
	if exp := data[KeyExpiresAt]; exp != "" && exp != Never {
		if _, err := time.Parse(time.RFC3339, exp); err != nil {
			problems = append(problems, fmt.Sprintf("%s=%q is neither an RFC 3339 time nor %q", KeyExpiresAt, exp, Never))
		}
	}
	if id := data[KeyRunID]; strings.TrimSpace(id) != "" {
		if err := CheckRunID(id); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return Tags{}, fmt.Errorf("ConfigMap %s is not valid run metadata: %s", ConfigMapName, strings.Join(problems, "; "))
	}
	return Tags{RunID: data[KeyRunID], Revision: data[KeyRevision], ExpiresAt: data[KeyExpiresAt], RunKind: data[KeyRunKind]}, nil
}

// DefaultRunID is <environment>-<UTC time>, the time in ISO 8601's basic
// format and lower case (20261201t191333z): the run id is a Kubernetes
// label on Cluster objects and a GCP label, and neither allows the colons
// of RFC 3339 or upper case.
func DefaultRunID(environment string, now time.Time) string {
	return environment + "-" + strings.ToLower(now.UTC().Format("20060102T150405Z"))
}

// CheckRunID refuses a run id that cannot be a label value: the trees put
// it on Cluster objects as krops.io/run-id, where Flux's apply of a bad one
// fails long after the bootstrap started.
func CheckRunID(id string) error {
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 || id == "" {
		return fmt.Errorf("%s=%q cannot be a label value (the trees put it on Cluster objects as krops.io/run-id): use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", KeyRunID, id)
	}
	return nil
}

// Expired reports whether tags with the given expiry have expired at now.
// "never" never expires; an unparseable expiry is an error, not "expired".
func Expired(expiresAt string, now time.Time) (bool, error) {
	if expiresAt == Never {
		return false, nil
	}
	t, err := time.Parse(time.RFC3339, expiresAt)
	if err != nil {
		return false, fmt.Errorf("expiry %q is neither an RFC 3339 time nor %q", expiresAt, Never)
	}
	return !now.Before(t), nil
}
