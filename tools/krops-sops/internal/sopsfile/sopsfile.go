// Package sopsfile encrypts, decrypts and re-keys SOPS files through the
// SOPS library, by the creation rules of the repository's .sops.yaml, and
// makes the age key they are encrypted for. Plaintext stays in memory
// unless the caller asks for it on disk.
package sopsfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	"github.com/getsops/sops/v3/cmd/sops/common"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/version"
)

// ErrKeyExists: keygen never replaces a key, which would orphan every file
// encrypted for it.
var ErrKeyExists = errors.New("age key file exists")

// ErrNotEncrypted and ErrEncrypted name a file in the wrong state for the
// verb (decrypt, updatekeys; encrypt).
var (
	ErrNotEncrypted = errors.New("not a SOPS-encrypted file")
	ErrEncrypted    = errors.New("already SOPS-encrypted")
	ErrNoRule       = errors.New("no .sops.yaml creation rule")
	// ErrCannotDecrypt: no identity SOPS found opens the file's data key.
	ErrCannotDecrypt = errors.New("cannot decrypt with the age key (AGE_KEY_FILE, or SOPS_AGE_KEY_FILE)")
)

// Keygen writes a new X25519 age identity to path (mode 0600, in a
// directory it creates 0700 when missing) and returns its public key.
func Keygen(path string) (string, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("age key file %s: %w", path, err)
	}
	// O_EXCL: an existing file, even one created a moment ago by another
	// process, is never overwritten.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%w: %s (krops never replaces a key: files encrypted for it would be lost; move it away first, or point AGE_KEY_FILE elsewhere)", ErrKeyExists, path)
	}
	if err != nil {
		return "", fmt.Errorf("age key file %s: %w", path, err)
	}
	pub := id.Recipient().String()
	_, werr := fmt.Fprintf(f, "# public key: %s\n%s\n", pub, id)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("writing age key file %s: %w", path, werr)
	}
	return pub, nil
}

// Files is one operation over files: the .sops.yaml that rules them
// (found upward from each file when empty).
type Files struct {
	Config string
}

func (o Files) configFor(path string) (string, error) {
	if o.Config != "" {
		return o.Config, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	res, err := config.LookupConfigFile(abs) // it searches from the file's directory
	if err != nil || res.Path == "" {
		return "", fmt.Errorf("%w for %s: no .sops.yaml in its directory or above (create one at the repository root; docs/secrets.md)", ErrNoRule, path)
	}
	return res.Path, nil
}

// creationRule is the rule of conf that governs path: SOPS matches
// path_regex against the path relative to the directory of .sops.yaml,
// which the error names too.
func creationRule(conf, path string) (*config.Config, error) {
	rel := path
	if abs, err := filepath.Abs(path); err == nil {
		if r, err := filepath.Rel(filepath.Dir(conf), abs); err == nil {
			rel = r
		}
	}
	rule, err := config.LoadCreationRuleForFile(conf, filepath.Join(filepath.Dir(conf), rel), nil)
	// SOPS says so only in the message.
	if (err != nil && strings.Contains(err.Error(), "no matching creation rules")) || (err == nil && (rule == nil || len(rule.KeyGroups) == 0)) {
		return nil, fmt.Errorf("%w in %s matches %s: add a creation_rules entry whose path_regex matches it", ErrNoRule, conf, rel)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", path, conf, err)
	}
	return rule, nil
}

func storeFor(path string) common.Store {
	return common.DefaultStoreForPath(config.NewStoresConfig(), path)
}

// Encrypt encrypts path in place for the recipients of its creation rule.
func (o Files) Encrypt(path string) error {
	conf, err := o.configFor(path)
	if err != nil {
		return err
	}
	rule, err := creationRule(conf, path)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	store := storeFor(path)
	branches, err := store.LoadPlainFile(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(branches) == 0 {
		return fmt.Errorf("%s is empty: nothing to encrypt", path)
	}
	if store.HasSopsTopLevelKey(branches[0]) {
		return fmt.Errorf("%s: %w", path, ErrEncrypted)
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{
		KeyGroups: rule.KeyGroups, ShamirThreshold: rule.ShamirThreshold,
		UnencryptedSuffix: rule.UnencryptedSuffix, EncryptedSuffix: rule.EncryptedSuffix,
		UnencryptedRegex: rule.UnencryptedRegex, EncryptedRegex: rule.EncryptedRegex,
		UnencryptedCommentRegex: rule.UnencryptedCommentRegex, EncryptedCommentRegex: rule.EncryptedCommentRegex,
		MACOnlyEncrypted: rule.MACOnlyEncrypted, Version: version.Version,
	}, FilePath: path}
	key, errs := tree.GenerateDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewLocalClient()})
	if len(errs) > 0 {
		return fmt.Errorf("%s: encrypting the data key for the recipients of %s: %w", path, conf, errors.Join(errs...))
	}
	if err := common.EncryptTree(common.EncryptTreeOpts{Tree: &tree, Cipher: aes.NewCipher(), DataKey: key}); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return replace(path, out)
}

// load reads an encrypted file and decrypts it with the age identities
// SOPS finds (SOPS_AGE_KEY_FILE, SOPS_AGE_KEY).
func load(path string) (common.Store, *sops.Tree, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	store := storeFor(path)
	tree, err := store.LoadEncryptedFile(raw)
	if err != nil {
		if errors.Is(err, sops.MetadataNotFound) {
			return nil, nil, nil, fmt.Errorf("%s: %w", path, ErrNotEncrypted)
		}
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	key, err := common.DecryptTree(common.DecryptTreeOpts{Tree: &tree, Cipher: aes.NewCipher(), KeyServices: []keyservice.KeyServiceClient{keyservice.NewLocalClient()}})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w: %s", path, ErrCannotDecrypt, firstLine(err.Error()))
	}
	return store, &tree, key, nil
}

// Decrypt returns path's plaintext.
func Decrypt(path string) ([]byte, error) {
	store, tree, _, err := load(path)
	if err != nil {
		return nil, err
	}
	out, err := store.EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// DecryptInPlace replaces path with its plaintext.
func DecryptInPlace(path string) error {
	out, err := Decrypt(path)
	if err != nil {
		return err
	}
	return replace(path, out)
}

// UpdateKeys re-encrypts path's data key for the recipients its creation
// rule names now, and says whether they changed. The values are not
// re-encrypted: the data key stays, only who can open it changes.
func (o Files) UpdateKeys(path string) (bool, error) {
	conf, err := o.configFor(path)
	if err != nil {
		return false, err
	}
	rule, err := creationRule(conf, path)
	if err != nil {
		return false, err
	}
	store, tree, key, err := load(path)
	if err != nil {
		return false, err
	}
	if sameRecipients(tree.Metadata.KeyGroups, rule.KeyGroups) && tree.Metadata.ShamirThreshold == rule.ShamirThreshold {
		return false, nil
	}
	tree.Metadata.KeyGroups, tree.Metadata.ShamirThreshold = rule.KeyGroups, rule.ShamirThreshold
	if errs := tree.Metadata.UpdateMasterKeysWithKeyServices(key, []keyservice.KeyServiceClient{keyservice.NewLocalClient()}); len(errs) > 0 {
		return false, fmt.Errorf("%s: encrypting the data key for the recipients of %s: %w", path, conf, errors.Join(errs...))
	}
	// The values are encrypted again with the same data key, so the MAC and
	// every value stay valid; the file is written only through the store.
	if err := common.EncryptTree(common.EncryptTreeOpts{Tree: tree, Cipher: aes.NewCipher(), DataKey: key}); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	out, err := store.EmitEncryptedFile(*tree)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, replace(path, out)
}

// Recipients lists the master keys of a file's groups, for reports.
func Recipients(groups []sops.KeyGroup) []string {
	var out []string
	for _, g := range groups {
		for _, k := range g {
			out = append(out, k.ToString())
		}
	}
	return out
}

func sameRecipients(a, b []sops.KeyGroup) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := Recipients(a[i:i+1]), Recipients(b[i:i+1])
		if len(x) != len(y) {
			return false
		}
		seen := map[string]bool{}
		for _, k := range x {
			seen[k] = true
		}
		for _, k := range y {
			if !seen[k] {
				return false
			}
		}
	}
	return true
}

// Find lists the *.sops.yaml files under the roots, sorted.
func Find(roots ...string) ([]string, error) {
	var out []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".sops.yaml") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return out, nil
}

// replace writes data over path atomically, keeping its mode.
func replace(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), st.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
