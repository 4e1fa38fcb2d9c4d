package install

import (
	"fmt"
	"os"

	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/decrypt"
)

// DecryptAll decrypts SOPS-encrypted YAML manifests in memory with the age
// key in ageKeyFile; the plaintext never touches disk. It runs before
// anything changes, so a key that does not fit is a preflight failure.
func DecryptAll(files []File, ageKeyFile string) ([]File, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// The SOPS library reads the age identity from this variable; an
	// explicit SOPS_AGE_KEY_FILE wins, as with the sops CLI.
	if os.Getenv("SOPS_AGE_KEY_FILE") == "" && os.Getenv("SOPS_AGE_KEY") == "" {
		if err := os.Setenv("SOPS_AGE_KEY_FILE", ageKeyFile); err != nil {
			return nil, err
		}
	}
	out := make([]File, 0, len(files))
	for _, f := range files {
		plain, err := decrypt.DataWithFormat(f.Data, formats.Yaml)
		if err != nil {
			return nil, fmt.Errorf("pivot-sops-secrets %s: cannot decrypt with the age key %s (AGE_KEY_FILE, or SOPS_AGE_KEY_FILE): %v", f.Path, ageKeyFile, err)
		}
		out = append(out, File{Path: f.Path, Data: plain})
	}
	return out, nil
}
