// Package steps runs a tool's named steps in order: the one runner the
// pivot and the teardown share. A step that is behind an earlier run is
// skipped (resume), a step's error ends the run, and a test may stop a run
// after a named step (the rerun tests; see each binary's testhooks.go).
// What a step prints is its own: it reports through kit/ui's progress line.
package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Step is one named step.
type Step struct {
	// Name is stable: state files, StopAfter and docs name steps by it.
	Name string
	Run  func(context.Context) error
	// Done, when set, says the step is behind us (an earlier run did it):
	// Run is not called. Resumed, when set, runs instead (a step whose
	// effect later steps need, such as a client it would have built).
	Done    func() bool
	Resumed func(context.Context) error
}

// ErrStopped is returned when a run stopped on request after a step.
var ErrStopped = errors.New("stopped on request after a step")

// Options configure a run.
type Options struct {
	// StopAfter ends the run with ErrStopped after the named step.
	StopAfter string
}

// Run runs steps in order until one fails.
func Run(ctx context.Context, o Options, steps ...Step) error {
	if o.StopAfter != "" && !slices.ContainsFunc(steps, func(s Step) bool { return s.Name == o.StopAfter }) {
		return fmt.Errorf("stop after %q: no such step", o.StopAfter)
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch {
		case s.Done != nil && s.Done():
			if s.Resumed != nil {
				err = s.Resumed(ctx)
			}
		default:
			err = s.Run(ctx)
		}
		if err != nil {
			return err
		}
		if o.StopAfter == s.Name {
			return fmt.Errorf("%w %s", ErrStopped, s.Name)
		}
	}
	return nil
}
