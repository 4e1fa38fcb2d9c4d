package steps

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRunOrderResumeStopAndFailure(t *testing.T) {
	var ran []string
	step := func(name string, done bool, fail error) Step {
		return Step{Name: name, Run: func(context.Context) error { ran = append(ran, name); return fail },
			Done:    func() bool { return done },
			Resumed: func(context.Context) error { ran = append(ran, name+"(resumed)"); return nil }}
	}
	ctx := context.Background()
	if err := Run(ctx, Options{}, step("a", true, nil), step("b", false, nil), step("c", false, nil)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ran, ","); got != "a(resumed),b,c" {
		t.Errorf("ran %s", got)
	}
	ran = nil
	err := Run(ctx, Options{StopAfter: "b"}, step("a", false, nil), step("b", false, nil), step("c", false, nil))
	if !errors.Is(err, ErrStopped) || strings.Join(ran, ",") != "a,b" {
		t.Errorf("stop after b: ran %v, err %v", ran, err)
	}
	ran = nil
	boom := errors.New("boom")
	if err := Run(ctx, Options{}, step("a", false, boom), step("b", false, nil)); !errors.Is(err, boom) || strings.Join(ran, ",") != "a" {
		t.Errorf("a failing step must end the run: ran %v, err %v", ran, err)
	}
	if err := Run(ctx, Options{StopAfter: "nope"}, step("a", false, nil)); err == nil || !strings.Contains(err.Error(), `"nope": no such step`) {
		t.Errorf("an unknown stop point: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	ran = nil
	if err := Run(cancelled, Options{}, step("a", false, nil)); !errors.Is(err, context.Canceled) || len(ran) != 0 {
		t.Errorf("a cancelled run started a step: %v %v", ran, err)
	}
}
