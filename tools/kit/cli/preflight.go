package cli

import (
	"errors"
	"strings"
)

// Preflight collects the problems of a tool's checks before it changes
// anything, so one run reports every problem (clusterctl's aggregated
// preflight) instead of the first. Add plain text or errors; Err fails
// with all of them.
type Preflight struct {
	problems []string
	// worst is the exit code the problems add up to: an unknown state
	// (3) outranks a refusal (2), which outranks a failure (1).
	worst int
}

// Addf records a problem of the configuration or the environment (exit 2).
func (p *Preflight) Addf(format string, args ...any) {
	p.Add(Usagef(format, args...))
}

// Add records err (nothing when nil), keeping its exit code: a check that
// could not tell (exit 3) keeps the run's answer "unknown", one that failed
// (1) stays a failure unless a refusal joins it.
func (p *Preflight) Add(err error) {
	if err == nil {
		return
	}
	p.problems = append(p.problems, err.Error())
	p.worst = max(p.worst, ExitCode(err))
}

// Failed says whether a problem was recorded.
func (p *Preflight) Failed() bool { return len(p.problems) > 0 }

// Err is nil when no problem was recorded; otherwise one error listing
// every problem under what, with the highest exit code among them.
func (p *Preflight) Err(what string) error {
	if !p.Failed() {
		return nil
	}
	err := errors.New(what + ":\n  " + strings.Join(p.problems, "\n  "))
	switch p.worst {
	case ExitUnknownState:
		return UnknownStateError(err)
	case ExitFailed:
		return err
	}
	return UsageError(err)
}
