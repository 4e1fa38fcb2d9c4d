package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kropsdev/krops/tools/testenv"
)

// The tests run the real krops-sops binary; the keys are real age keys it
// makes, the files real SOPS files, read back through the SOPS library.

var builds *testenv.Builds

func TestMain(m *testing.M) {
	b, err := testenv.NewBuilds()
	if err != nil {
		panic(err)
	}
	builds = b
	code := m.Run()
	b.Remove()
	os.Exit(code)
}

type repo struct {
	t        *testing.T
	dir, bin string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	return &repo{t: t, dir: t.TempDir(), bin: builds.Binary(t, ".", "krops-sops")}
}

func (r *repo) run(env []string, args ...string) testenv.Result {
	r.t.Helper()
	return testenv.RunBinary(r.t, r.dir, append([]string{"PATH=/usr/bin:/bin", "HOME=" + r.dir, "NO_COLOR=1"}, env...), r.bin, args...)
}

func (r *repo) write(rel, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *repo) read(rel string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, rel))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

var publicKey = regexp.MustCompile(`(?m)^Public key: (age1[0-9a-z]{58})$`)

func (r *repo) keygen(file string) string {
	r.t.Helper()
	res := r.run([]string{"AGE_KEY_FILE=" + file}, "keygen")
	m := publicKey.FindStringSubmatch(res.Stdout)
	if res.Code != 0 || m == nil {
		r.t.Fatalf("keygen %s: exit %d\n%s\n%s", file, res.Code, res.Stdout, res.Stderr)
	}
	return m[1]
}

func TestKeygenWritesA0600KeyAndNeverReplacesIt(t *testing.T) {
	r := newRepo(t)
	pub := r.keygen("keys/age.agekey")
	st, err := os.Stat(filepath.Join(r.dir, "keys/age.agekey"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	key := r.read("keys/age.agekey")
	if !strings.Contains(key, "# public key: "+pub) || !strings.Contains(key, "AGE-SECRET-KEY-1") {
		t.Errorf("key file does not hold the identity for %s", pub)
	}
	res := r.run([]string{"AGE_KEY_FILE=keys/age.agekey"}, "keygen")
	if res.Code != 2 || !strings.Contains(res.Stderr, "keys/age.agekey") || !strings.Contains(res.Stderr, "never replaces") {
		t.Errorf("second keygen: exit %d, want 2 naming the file\n%s", res.Code, res.Stderr)
	}
	if r.read("keys/age.agekey") != key {
		t.Error("the second keygen changed the key")
	}
	if strings.Contains(res.Stdout+res.Stderr, "AGE-SECRET-KEY") {
		t.Error("the private key was printed")
	}
	// The default is age.agekey in the working directory.
	r.keygen("")
	if _, err := os.Stat(filepath.Join(r.dir, "age.agekey")); err != nil {
		t.Errorf("default AGE_KEY_FILE: %v", err)
	}
}

const secret = `apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: default
stringData:
  password: hunter2-very-secret
`

func rules(recipients ...string) string {
	return "creation_rules:\n- path_regex: .*\\.sops\\.yaml$\n  encrypted_regex: ^(data|stringData)$\n  age: " + strings.Join(recipients, ",") + "\n"
}

// encrypt, decrypt and updatekeys by .sops.yaml, the way a key rotation
// goes (docs/secrets.md): add the new recipient, re-key, decrypt with the
// new key.
func TestEncryptDecryptAndRotate(t *testing.T) {
	r := newRepo(t)
	oldPub, newPub := r.keygen("old.agekey"), r.keygen("new.agekey")
	r.write(".sops.yaml", rules(oldPub))
	r.write("mgmt/local-host/db.sops.yaml", secret)
	withOld, withNew := []string{"AGE_KEY_FILE=old.agekey"}, []string{"AGE_KEY_FILE=new.agekey"}
	all := ""
	check := func(what string, res testenv.Result, code int) {
		t.Helper()
		all += res.Stdout + res.Stderr
		if res.Code != code {
			t.Fatalf("%s: exit %d, want %d\n%s\n%s", what, res.Code, code, res.Stdout, res.Stderr)
		}
	}

	check("encrypt", r.run(withOld, "encrypt", "mgmt/local-host/db.sops.yaml"), 0)
	enc := r.read("mgmt/local-host/db.sops.yaml")
	if strings.Contains(enc, "hunter2") || !strings.Contains(enc, "ENC[AES256_GCM") || !strings.Contains(enc, oldPub) || !strings.Contains(enc, "name: db") {
		t.Fatalf("encrypted file:\n%s", enc)
	}
	res := r.run(withOld, "encrypt", "mgmt/local-host/db.sops.yaml")
	check("encrypt again", res, 2)
	if !strings.Contains(res.Stderr, "already SOPS-encrypted") {
		t.Errorf("encrypt again: %s", res.Stderr)
	}

	res = r.run(withOld, "decrypt", "mgmt/local-host/db.sops.yaml")
	if res.Code != 0 || !strings.Contains(res.Stdout, "password: hunter2-very-secret") {
		t.Fatalf("decrypt: exit %d\n%s", res.Code, res.Stderr)
	}
	if r.read("mgmt/local-host/db.sops.yaml") != enc {
		t.Error("decrypt without --in-place changed the file")
	}
	res = r.run(withNew, "decrypt", "mgmt/local-host/db.sops.yaml")
	check("decrypt with a key it is not encrypted for", res, 2)
	if !strings.Contains(res.Stderr, "AGE_KEY_FILE") || !strings.Contains(res.Stderr, "db.sops.yaml") {
		t.Errorf("wrong key: %s", res.Stderr)
	}

	// Rotation: both recipients, re-key, then the new key opens it.
	r.write(".sops.yaml", rules(oldPub, newPub))
	res = r.run(withOld, "updatekeys")
	check("updatekeys", res, 0)
	if !strings.Contains(res.Stderr, "re-keyed mgmt/local-host/db.sops.yaml") || !strings.Contains(res.Stderr, "1 of 1 files re-keyed") {
		t.Errorf("updatekeys: %s", res.Stderr)
	}
	res = r.run(withNew, "decrypt", "mgmt/local-host/db.sops.yaml")
	if res.Code != 0 || !strings.Contains(res.Stdout, "hunter2-very-secret") {
		t.Fatalf("decrypt with the new key after updatekeys: exit %d\n%s", res.Code, res.Stderr)
	}
	res = r.run(withNew, "updatekeys", "mgmt/local-host/db.sops.yaml")
	check("updatekeys again", res, 0)
	if !strings.Contains(res.Stderr, "recipients unchanged") {
		t.Errorf("updatekeys with nothing to do: %s", res.Stderr)
	}
	// The old recipient removed: the old key no longer opens the file.
	r.write(".sops.yaml", rules(newPub))
	check("updatekeys dropping the old key", r.run(withNew, "updatekeys"), 0)
	check("decrypt with the dropped key", r.run(withOld, "decrypt", "mgmt/local-host/db.sops.yaml"), 2)

	// In place, on request only, with a warning.
	res = r.run(withNew, "decrypt", "--in-place", "mgmt/local-host/db.sops.yaml")
	check("decrypt --in-place", res, 0)
	if got := r.read("mgmt/local-host/db.sops.yaml"); !strings.Contains(got, "hunter2-very-secret") || strings.Contains(got, "sops:") {
		t.Errorf("decrypted in place:\n%s", got)
	}
	if !strings.Contains(res.Stderr, "plaintext") {
		t.Errorf("no warning about plaintext on disk: %s", res.Stderr)
	}
	if strings.Contains(all+res.Stderr, "hunter2") {
		t.Error("a secret value reached stderr or stdout outside decrypt's output")
	}
}

func TestRefusalsNameTheFileAndExit2(t *testing.T) {
	r := newRepo(t)
	pub := r.keygen("age.agekey")
	r.write(".sops.yaml", rules(pub))
	r.write("notes.yaml", "a: b\n")
	r.write("plain.sops.yaml", secret)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"encrypt", "notes.yaml"}, "creation_rules entry whose path_regex matches"},
		{[]string{"encrypt", "missing.sops.yaml"}, "missing.sops.yaml"},
		{[]string{"encrypt"}, "at least one FILE"},
		{[]string{"decrypt", "plain.sops.yaml"}, "not a SOPS-encrypted file"},
		{[]string{"decrypt", "a.sops.yaml", "b.sops.yaml"}, "--in-place"},
		{[]string{"keygen", "extra"}, "no arguments"},
	} {
		res := r.run(nil, c.args...)
		if res.Code != 2 || !strings.Contains(res.Stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s", c.args, res.Code, c.want, res.Stderr)
		}
	}
	// No .sops.yaml anywhere above the file.
	if err := os.Remove(filepath.Join(r.dir, ".sops.yaml")); err != nil {
		t.Fatal(err)
	}
	if res := r.run(nil, "encrypt", "plain.sops.yaml"); res.Code != 2 || !strings.Contains(res.Stderr, "no .sops.yaml") {
		t.Errorf("without .sops.yaml: exit %d\n%s", res.Code, res.Stderr)
	}
	if res := r.run([]string{"AGE_KEY_FILE=nope.agekey"}, "decrypt", "plain.sops.yaml"); res.Code != 2 || !strings.Contains(res.Stderr, "krops-sops keygen") {
		t.Errorf("without the key file: exit %d\n%s", res.Code, res.Stderr)
	}
}
