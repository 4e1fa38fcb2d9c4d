package proc

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestArgvIsNotInterpretedByAShell(t *testing.T) {
	res, err := Exec{}.Run(context.Background(), Cmd{Path: "/bin/echo", Args: []string{"$HOME", "a;b", "`x`"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "$HOME a;b `x`\n" {
		t.Errorf("stdout %q", got)
	}
}

func TestEnvironmentIsExplicit(t *testing.T) {
	t.Setenv("KROPS_PROC_TEST_LEAK", "leaked")
	res, err := Exec{}.Run(context.Background(), Cmd{Path: "/usr/bin/env", Env: []string{"ONLY=this"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "ONLY=this" {
		t.Errorf("child environment %q, want only ONLY=this", got)
	}
	if got := Inherit("KROPS_PROC_TEST_LEAK", "KROPS_PROC_TEST_UNSET"); len(got) != 1 || got[0] != "KROPS_PROC_TEST_LEAK=leaked" {
		t.Errorf("Inherit = %v", got)
	}
}

func TestErrorsShowACopyableCommandWithSecretsRedacted(t *testing.T) {
	secret := "ghp_0123456789"
	_, err := Exec{}.Run(context.Background(), Cmd{
		Path:    "/bin/sh",
		Args:    []string{"-c", "echo token " + secret + " rejected >&2; exit 3", "it's"},
		Secrets: []string{secret},
	})
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	if strings.Contains(msg, secret) {
		t.Errorf("secret leaked: %s", msg)
	}
	for _, w := range []string{"running /bin/sh -c 'echo token [redacted] rejected >&2; exit 3' 'it'\\''s'", "exit status 3", "token [redacted] rejected"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q lacks %q", msg, w)
		}
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Result.ExitCode != 3 {
		t.Errorf("exit code: %v", err)
	}
}

func TestCancellationStopsTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Exec{WaitDelay: time.Second}.Run(ctx, Cmd{Path: "/bin/sleep", Args: []string{"30"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("cancellation took %v", time.Since(start))
	}
}

func TestMissingProgram(t *testing.T) {
	_, err := Exec{}.Run(context.Background(), Cmd{Path: "krops-no-such-program", Env: os.Environ()})
	if err == nil || !strings.Contains(err.Error(), "krops-no-such-program") {
		t.Errorf("err = %v", err)
	}
}
