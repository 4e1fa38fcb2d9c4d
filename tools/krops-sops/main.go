// Command krops-sops makes the age key and encrypts, decrypts and re-keys
// the SOPS files of the trees by the repository's .sops.yaml, through the
// SOPS and age Go libraries (no sops or age binary, no shell).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/krops-sops/internal/sopsfile"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(cli.Run(context.Background(), newApp(), os.Args, cli.RunOptions{}))
}

// The trees whose *.sops.yaml updatekeys re-keys when given no file.
var treeRoots = []string{"mgmt", "workload"}

// newApp is the command line: what main parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	return cli.New(cli.Options{
		Name:  "krops-sops",
		Usage: "make the age key; encrypt, decrypt and re-key SOPS files by .sops.yaml",
		Description: `The age key is the file AGE_KEY_FILE names (default age.agekey in the working directory). Files are
encrypted for the recipients of the first creation rule of .sops.yaml (looked up from each file's directory upward)
whose path_regex matches them, and decrypted with the age key (SOPS_AGE_KEY_FILE or SOPS_AGE_KEY, when set, win, as
with the sops CLI). Plaintext is written to disk only by decrypt --in-place.

Exit codes: 0 done; 1 a failure; 2 a refusal, naming the file and what to do (an existing key, a file already in the
wanted state, no creation rule, a key that does not open the file).`,
		Version: version,
		Knobs:   []string{"AGE_KEY_FILE"},
		Commands: []*ucli.Command{
			{Name: "keygen", Usage: "write a new age key to AGE_KEY_FILE (0600) and print its public key; never replaces an existing key", Action: keygen},
			{Name: "encrypt", Usage: "encrypt each FILE in place for its .sops.yaml recipients", ArgsUsage: "FILE...", Action: encrypt},
			{Name: "decrypt", Usage: "print FILE's plaintext (--in-place: replace each FILE with it)", ArgsUsage: "FILE...", Action: decrypt,
				Flags: []ucli.Flag{&ucli.BoolFlag{Name: "in-place", Aliases: []string{"i"}, Usage: "write the plaintext over each file (keep it out of git)"}}},
			{Name: "updatekeys", Usage: "re-key each FILE (default: every *.sops.yaml under mgmt/ and workload/) for the recipients .sops.yaml names now", ArgsUsage: "[FILE...]", Action: updatekeys},
		},
	})
}

// ageKeyFile is AGE_KEY_FILE (flag or environment), relative to the working
// directory, default age.agekey.
func ageKeyFile(c *ucli.Context) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	p, _ := cli.Lookup(c)("AGE_KEY_FILE")
	if p == "" {
		p = "age.agekey"
	}
	return config.CallerPath(wd, p), nil
}

// useAgeKey points the SOPS library at AGE_KEY_FILE unless the user chose
// SOPS's own variables.
func useAgeKey(c *ucli.Context) error {
	if os.Getenv("SOPS_AGE_KEY_FILE") != "" || os.Getenv("SOPS_AGE_KEY") != "" {
		return nil
	}
	p, err := ageKeyFile(c)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err != nil {
		return cli.Usagef("age key file %s: %v (set AGE_KEY_FILE, or make one with `krops-sops keygen`)", p, errors.Unwrap(err))
	}
	return os.Setenv("SOPS_AGE_KEY_FILE", p)
}

func keygen(c *ucli.Context) error {
	if c.NArg() > 0 {
		return cli.Usagef("keygen takes no arguments (the file is AGE_KEY_FILE), got %v", c.Args().Slice())
	}
	p, err := ageKeyFile(c)
	if err != nil {
		return err
	}
	pub, err := sopsfile.Keygen(p)
	if errors.Is(err, sopsfile.ErrKeyExists) {
		return cli.UsageError(err)
	}
	if err != nil {
		return err
	}
	cli.Printer(c, c.App.ErrWriter).Successf("wrote %s (0600); put the public key in AGE_PUBLIC_KEY and in .sops.yaml's creation rules", p)
	fmt.Fprintf(c.App.Writer, "Public key: %s\n", pub)
	return nil
}

func files(c *ucli.Context, verb string) ([]string, error) {
	if c.NArg() == 0 {
		return nil, cli.Usagef("%s needs at least one FILE", verb)
	}
	return c.Args().Slice(), nil
}

// refusal makes the errors that name a file in the wrong state exit 2.
func refusal(err error) error {
	if errors.Is(err, sopsfile.ErrEncrypted) || errors.Is(err, sopsfile.ErrNotEncrypted) || errors.Is(err, sopsfile.ErrNoRule) || errors.Is(err, sopsfile.ErrCannotDecrypt) || errors.Is(err, os.ErrNotExist) {
		return cli.UsageError(err)
	}
	return err
}

func encrypt(c *ucli.Context) error {
	paths, err := files(c, "encrypt")
	if err != nil {
		return err
	}
	out := cli.Printer(c, c.App.ErrWriter)
	for _, p := range paths {
		if err := (sopsfile.Files{}).Encrypt(p); err != nil {
			return refusal(err)
		}
		out.Successf("encrypted %s", p)
	}
	return nil
}

func decrypt(c *ucli.Context) error {
	paths, err := files(c, "decrypt")
	if err != nil {
		return err
	}
	if !c.Bool("in-place") && len(paths) > 1 {
		return cli.Usagef("decrypt prints one file; give one FILE, or --in-place for several")
	}
	if err := useAgeKey(c); err != nil {
		return err
	}
	if !c.Bool("in-place") {
		plain, err := sopsfile.Decrypt(paths[0])
		if err != nil {
			return refusal(err)
		}
		_, err = c.App.Writer.Write(plain)
		return err
	}
	out := cli.Printer(c, c.App.ErrWriter)
	for _, p := range paths {
		if err := sopsfile.DecryptInPlace(p); err != nil {
			return refusal(err)
		}
		out.Warnf("decrypted %s in place: it holds plaintext now; `krops-sops encrypt %s` before committing", p, p)
	}
	return nil
}

func updatekeys(c *ucli.Context) error {
	paths := c.Args().Slice()
	if len(paths) == 0 {
		found, err := sopsfile.Find(treeRoots...)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			cli.Printer(c, c.App.ErrWriter).Infof("no *.sops.yaml under %v: nothing to re-key", treeRoots)
			return nil
		}
		paths = found
	}
	if err := useAgeKey(c); err != nil {
		return err
	}
	out := cli.Printer(c, c.App.ErrWriter)
	changed := 0
	for _, p := range paths {
		did, err := (sopsfile.Files{}).UpdateKeys(p)
		if err != nil {
			return refusal(fmt.Errorf("%w (%d of %d files re-keyed before it)", err, changed, len(paths)))
		}
		if did {
			changed++
			out.Successf("re-keyed %s", p)
		} else {
			out.Infof("%s: recipients unchanged", p)
		}
	}
	out.Successf("%d of %d files re-keyed", changed, len(paths))
	return nil
}
