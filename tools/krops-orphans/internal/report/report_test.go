package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(h float64) *time.Time {
	t := now.Add(-time.Duration(h * float64(time.Hour)))
	return &t
}

func build(o Options, rs ...sdk.Resource) Report {
	b := NewBuilder(o)
	for i := range rs {
		b.Add(sdk.DiscoverEvent{Resource: &rs[i]})
	}
	return b.Report()
}

func TestOrphanRule(t *testing.T) {
	r := build(Options{Now: now, MinAgeHours: 6},
		sdk.Resource{Kind: "vpc", ID: "exactly-min", CreatedAt: at(6)},
		sdk.Resource{Kind: "vpc", ID: "just-below", CreatedAt: at(5.9)},
		sdk.Resource{Kind: "vpc", ID: "unknown"},
		sdk.Resource{Kind: "vpc", ID: "future", CreatedAt: at(-1)},
	)
	want := map[string]bool{"exactly-min": true, "just-below": false, "unknown": true, "future": false}
	for _, f := range r.Findings {
		if f.IsOrphan != want[f.ID] {
			t.Errorf("%s: is_orphan %v, want %v", f.ID, f.IsOrphan, want[f.ID])
		}
	}
	if r.OrphanCount != 2 || r.RecentCount != 2 {
		t.Errorf("counts %d/%d", r.OrphanCount, r.RecentCount)
	}
}

func TestRunsExpiryAndSinceRun(t *testing.T) {
	tags := func(run, exp string) map[string]string { return map[string]string{TagRunID: run, TagExpiresAt: exp} }
	rs := []sdk.Resource{
		{Kind: "a", ID: "1", Tags: tags("r1", "2026-11-30T11:59:59Z")},
		{Kind: "a", ID: "2", Tags: tags("r2", "never")},
		{Kind: "a", ID: "3", Tags: tags("r2", "not-a-time")},
	}
	r := build(Options{Now: now}, rs...)
	exp := map[string]bool{}
	for _, f := range r.Findings {
		exp[f.ID] = f.Expired
	}
	if !exp["1"] || exp["2"] || exp["3"] {
		t.Errorf("expired flags %v (an unparseable expiry is not a guess)", exp)
	}
	r = build(Options{Now: now, SinceRun: "r2"}, rs...)
	if len(r.Findings) != 2 || r.SinceRun != "r2" {
		t.Errorf("since-run r2: %+v", r.Findings)
	}
}

func TestErrorsScopeOrderAndEscaping(t *testing.T) {
	b := NewBuilder(Options{Now: now, Environment: "e", Remediation: "krops-sweep cloud e"})
	b.Add(sdk.DiscoverEvent{Scope: &sdk.Scope{Account: "acct"}})
	b.Add(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: "vpc", Region: "r2", Message: "denied"}})
	b.Add(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: "eks", Message: "down"}})
	b.Add(sdk.DiscoverEvent{Resource: &sdk.Resource{Kind: "z", ID: "b|c"}})
	b.Add(sdk.DiscoverEvent{Resource: &sdk.Resource{Kind: "a", ID: "x"}})
	r := b.Report()
	if r.AccountID != "acct" || r.Findings[0].Kind != "a" || r.Errors[0].Kind != "eks" {
		t.Errorf("report %+v", r)
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`| z | - | b\|c |`, "- eks in all regions: down", "- vpc in r2: denied", "krops-sweep cloud e"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
