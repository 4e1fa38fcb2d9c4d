package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/common"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

func TestSubstitute(t *testing.T) {
	vars := Vars(map[string]map[string]string{
		"b-later": {"SHARED": "from-b", "ONLY_B": "b"},
		"a-first": {"SHARED": "from-a", "ONLY_A": "a"},
	}, map[string]string{"OVERLAID": "config"})
	out, err := Substitute([]byte("x: ${SHARED}\ny: ${ONLY_A}-${ONLY_B}\nz: ${OVERLAID}\nd: ${UNSET:=fallback}\ne: ${ONLY_A:=unused}\nkeep: $PLAIN\n"), vars, "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// ConfigMaps merge in name order, so the later name wins; a default
	// applies only when the variable is unset; $PLAIN is not a reference.
	if want := "x: from-b\ny: a-b\nz: config\nd: fallback\ne: a\nkeep: $PLAIN\n"; string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	_, err = Substitute([]byte("a: ${MISSING}\nb: ${ALSO_MISSING}\nc: ${MISSING}\n"), vars, "pivot/x.yaml")
	if err == nil || !strings.Contains(err.Error(), "pivot/x.yaml: ${ALSO_MISSING}, ${MISSING} not set") {
		t.Errorf("unset variables: %v", err)
	}
}

// encrypt makes a SOPS file the way `sops --encrypt --age <recipient>` does,
// with the SOPS library (no sops CLI here).
func encrypt(t *testing.T, plain []byte, recipient string) []byte {
	t.Helper()
	store := sopsyaml.NewStore(&config.YAMLStoreConfig{})
	branches, err := store.LoadPlainFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	mk, err := sopsage.MasterKeyFromRecipient(recipient)
	if err != nil {
		t.Fatal(err)
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{KeyGroups: []sops.KeyGroup{{keys.MasterKey(mk)}}, EncryptedRegex: "^(data|stringData)$", Version: "3.13.2"}}
	dataKey, errs := tree.GenerateDataKey()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := common.EncryptTree(common.EncryptTreeOpts{DataKey: dataKey, Tree: &tree, Cipher: aes.NewCipher()}); err != nil {
		t.Fatal(err)
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDecryptAllInMemory(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "age.agekey")
	if err := os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := []byte("apiVersion: v1\nkind: Secret\nmetadata:\n    name: creds\n    namespace: capa-system\nstringData:\n    token: s3cr3t-value\n")
	enc := encrypt(t, plain, id.Recipient().String())
	if strings.Contains(string(enc), "s3cr3t-value") {
		t.Fatal("the test's encryption left the value in clear")
	}
	t.Setenv("SOPS_AGE_KEY_FILE", "")
	t.Setenv("SOPS_AGE_KEY", "")
	before, _ := os.ReadDir(dir)
	out, err := DecryptAll([]File{{Path: "secrets/creds.sops.yaml", Data: enc}}, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !strings.Contains(string(out[0].Data), "token: s3cr3t-value") {
		t.Fatalf("decrypted: %q", out)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("decrypting wrote files: %v", after)
	}

	// A file encrypted for someone else: named, and no value in the error.
	t.Setenv("SOPS_AGE_KEY_FILE", "")
	_, err = DecryptAll([]File{{Path: "secrets/theirs.sops.yaml", Data: encrypt(t, plain, other.Recipient().String())}}, keyFile)
	if err == nil || !strings.Contains(err.Error(), "secrets/theirs.sops.yaml: cannot decrypt with the age key "+keyFile) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("wrong key: %v", err)
	}
}
