// Package report builds and renders the orphan report: what a provider's
// Discover found, classified as orphaned or recent by age, grouped by run,
// with every failed query listed.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/runmeta"
)

// Schema identifies the JSON report's format. A new field is added without
// changing it; anything else changes it.
const Schema = "krops.io/orphan-report/v1"

// Run tags providers copy from the krops-run ConfigMap onto resources.
const (
	TagRunID     = "krops.io/run-id"
	TagExpiresAt = "krops.io/expires-at"
)

// Report is the JSON document (schema krops.io/orphan-report/v1).
type Report struct {
	Schema      string    `json:"schema"`
	Environment string    `json:"environment"`
	AccountID   string    `json:"account_id"`
	ScannedAt   time.Time `json:"scanned_at"`
	MinAgeHours uint32    `json:"min_age_hours"`
	// SinceRun, when set, limited the findings to one run.
	SinceRun    string    `json:"since_run,omitempty"`
	OrphanCount int       `json:"orphan_count"`
	RecentCount int       `json:"recent_count"`
	Findings    []Finding `json:"findings"`
	// Suspects look like the environment's but carry no evidence that they
	// are; no sweep touches them. Each one's evidence says why.
	Suspects []Finding `json:"suspects"`
	Errors   []Error   `json:"errors"`
	// Remediation is the command that sweeps this environment.
	Remediation string `json:"remediation"`
}

// Finding is one resource.
type Finding struct {
	Kind      string     `json:"kind"`
	Region    string     `json:"region"`
	ID        string     `json:"id"`
	Cluster   string     `json:"cluster"`
	CreatedAt *time.Time `json:"created_at"`
	// AgeHours is null when the cloud does not say when it was created.
	AgeHours  *float64 `json:"age_hours"`
	IsOrphan  bool     `json:"is_orphan"`
	Evidence  []string `json:"evidence"`
	RunID     string   `json:"run_id,omitempty"`
	ExpiresAt string   `json:"expires_at,omitempty"`
	Expired   bool     `json:"expired"`
}

// Error is a query that failed: those resources are unknown, not absent.
type Error struct {
	Kind    string `json:"kind"`
	Region  string `json:"region"`
	Message string `json:"message"`
}

// Options shape a report.
type Options struct {
	Environment string
	Now         time.Time
	MinAgeHours uint32
	SinceRun    string
	Remediation string
}

// Builder collects Discover events.
type Builder struct {
	o Options
	r Report
}

// NewBuilder starts a report.
func NewBuilder(o Options) *Builder {
	return &Builder{o: o, r: Report{
		Schema: Schema, Environment: o.Environment, ScannedAt: o.Now.UTC().Truncate(time.Second),
		MinAgeHours: o.MinAgeHours, SinceRun: o.SinceRun, Remediation: o.Remediation,
		Findings: []Finding{}, Suspects: []Finding{}, Errors: []Error{},
	}}
}

// Add records one Discover event.
func (b *Builder) Add(e sdk.DiscoverEvent) {
	switch {
	case e.Scope != nil:
		b.r.AccountID = e.Scope.Account
	case e.Error != nil:
		b.r.Errors = append(b.r.Errors, Error{Kind: e.Error.Kind, Region: e.Error.Region, Message: e.Error.Message})
	case e.Suspect != nil:
		f := b.finding(*e.Suspect)
		f.IsOrphan = false
		b.r.Suspects = append(b.r.Suspects, f)
	case e.Resource != nil:
		f := b.finding(*e.Resource)
		if b.o.SinceRun != "" && f.RunID != b.o.SinceRun {
			return
		}
		b.r.Findings = append(b.r.Findings, f)
	}
}

func (b *Builder) finding(r sdk.Resource) Finding {
	f := Finding{Kind: r.Kind, Region: r.Region, ID: r.ID, Cluster: r.Cluster, CreatedAt: r.CreatedAt, Evidence: r.Evidence,
		RunID: r.Tags[TagRunID], ExpiresAt: r.Tags[TagExpiresAt]}
	if f.Evidence == nil {
		f.Evidence = []string{}
	}
	// Unknown age counts as orphaned: without a creation time nothing
	// proves the resource belongs to a run still in progress.
	f.IsOrphan = true
	if r.CreatedAt != nil {
		age := b.o.Now.Sub(*r.CreatedAt).Hours()
		age = float64(int64(age*10+0.5)) / 10 // one decimal, stable in golden files
		f.AgeHours = &age
		f.IsOrphan = age >= float64(b.o.MinAgeHours)
	}
	if f.ExpiresAt != "" {
		if expired, err := runmeta.Expired(f.ExpiresAt, b.o.Now); err == nil {
			f.Expired = expired
		}
	}
	return f
}

// Report finishes the report: findings sorted by kind, region and id.
func (b *Builder) Report() Report {
	r := b.r
	sortFindings(r.Findings)
	sortFindings(r.Suspects)
	sort.SliceStable(r.Errors, func(i, j int) bool {
		return r.Errors[i].Kind+r.Errors[i].Region < r.Errors[j].Kind+r.Errors[j].Region
	})
	r.OrphanCount, r.RecentCount = 0, 0
	for _, f := range r.Findings {
		if f.IsOrphan {
			r.OrphanCount++
		} else {
			r.RecentCount++
		}
	}
	return r
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, c := fs[i], fs[j]
		if a.Kind != c.Kind {
			return a.Kind < c.Kind
		}
		if a.Region != c.Region {
			return a.Region < c.Region
		}
		return a.ID < c.ID
	})
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the human report (also used as the GitHub step
// summary).
func (r Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# krops orphan report: %s\n\n", r.Environment)
	account := r.AccountID
	if account == "" {
		account = "unknown"
	}
	fmt.Fprintf(&b, "- Account: %s\n- Scanned at: %s\n- Minimum age: %d h (younger resources are recent; unknown ages count as orphaned)\n",
		account, r.ScannedAt.Format(time.RFC3339), r.MinAgeHours)
	if r.SinceRun != "" {
		fmt.Fprintf(&b, "- Run: %s\n", r.SinceRun)
	}
	fmt.Fprintf(&b, "- Orphans: %d, recent: %d, suspects: %d, failed queries: %d\n\n", r.OrphanCount, r.RecentCount, len(r.Suspects), len(r.Errors))
	if len(r.Findings) == 0 {
		b.WriteString("No krops resources found.\n\n")
	} else {
		b.WriteString("| Kind | Region | ID | Cluster | Age (h) | Status |\n|---|---|---|---|---|---|\n")
		for _, f := range r.Findings {
			age := "unknown"
			if f.AgeHours != nil {
				age = fmt.Sprintf("%.1f", *f.AgeHours)
			}
			status := "recent"
			if f.IsOrphan {
				status = "orphan"
			}
			if f.Expired {
				status += ", expired"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(f.Kind), cell(f.Region), cell(f.ID), cell(f.Cluster), age, status)
		}
		b.WriteString("\n")
	}
	if runs := r.runs(); len(runs) > 0 {
		b.WriteString("## Runs\n\n| Run | Resources | Expires at | Expired |\n|---|---|---|---|\n")
		for _, run := range runs {
			fmt.Fprintf(&b, "| %s | %d | %s | %t |\n", cell(run.id), run.count, cell(run.expires), run.expired)
		}
		b.WriteString("\n")
	}
	if len(r.Suspects) > 0 {
		b.WriteString("## Suspects: not ours by evidence\n\n")
		b.WriteString("These look like the environment's, but nothing proves they are. No sweep touches them; check each one by hand.\n\n")
		b.WriteString("| Kind | Region | ID | Why suspect |\n|---|---|---|---|\n")
		for _, f := range r.Suspects {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(f.Kind), cell(f.Region), cell(f.ID), cell(strings.Join(f.Evidence, "; ")))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Errors\n\n")
	if len(r.Errors) == 0 {
		b.WriteString("None: every query succeeded.\n\n")
	} else {
		b.WriteString("These queries failed, so the resources they cover are unknown, not absent:\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- %s in %s: %s\n", e.Kind, orDash(e.Region), e.Message)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Remediation\n\n")
	if len(r.Errors) > 0 {
		b.WriteString("Fix the failed queries first: until every query succeeds the scope is unknown, and the sweep stops before deleting anything.\n\n")
	}
	if r.OrphanCount == 0 {
		b.WriteString("Nothing to do.\n")
	} else {
		fmt.Fprintf(&b, "Review the orphans above, then sweep them (preview first with `--dry-run`):\n\n```sh\n%s\n```\n", r.Remediation)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type runSummary struct {
	id, expires string
	count       int
	expired     bool
}

func (r Report) runs() []runSummary {
	byID := map[string]*runSummary{}
	var order []string
	for _, f := range r.Findings {
		if f.RunID == "" {
			continue
		}
		s, ok := byID[f.RunID]
		if !ok {
			s = &runSummary{id: f.RunID, expires: f.ExpiresAt}
			byID[f.RunID] = s
			order = append(order, f.RunID)
		}
		s.count++
		s.expired = s.expired || f.Expired
	}
	sort.Strings(order)
	out := make([]runSummary, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func orDash(s string) string {
	if s == "" {
		return "all regions"
	}
	return s
}
