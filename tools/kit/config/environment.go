package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SelectEnvironment picks the environment a run works on: a non-empty
// KROPS_PROFILE wins (so a mise environment layer cannot be overridden by a
// stray argument), then the positional argument, then
// bootstrap.default-environment. It resolves c.Bootstrap's names for it
// (kind cluster, kind context, management context).
func (c *Config) SelectEnvironment(profile, positional string) (*Environment, error) {
	name, from := c.Bootstrap.DefaultEnvironment, "bootstrap.default-environment in "+c.Path
	switch {
	case profile != "":
		name, from = profile, "KROPS_PROFILE"
	case positional != "":
		name, from = positional, "the command-line argument"
	}
	env, ok := c.Environments[name]
	if !ok {
		return nil, fmt.Errorf("unknown environment %q (from %s): known environments are %s", name, from, c.knownEnvironments())
	}
	c.Bootstrap = c.names.ForEnvironment(name)
	return &env, nil
}

// RepoPath resolves a repository-owned path from the configuration file
// against the repository root (the file's directory), so tools behave the
// same whichever directory they are started from.
func (c *Config) RepoPath(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(c.Root, rel)
}

// RepoFile resolves a repository-owned file and fails, naming the absolute
// path and the key that refers to it, when the file does not exist.
func (c *Config) RepoFile(key, rel string) (string, error) {
	p := c.RepoPath(rel)
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s names %s, which does not exist (resolved against the repository root %s)", key, p, c.Root)
		}
		return "", fmt.Errorf("%s names %s: %w", key, p, err)
	}
	return p, nil
}

// CallerPath resolves a path the caller supplied (AGE_KEY_FILE, KUBECONFIG,
// MGMT_KUBECONFIG) against the caller's working directory, not the repository.
func CallerPath(workDir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(workDir, p)
}
