package imageinventory

import (
	"strings"
	"testing"
)

const (
	dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestParseForms(t *testing.T) {
	src := strings.Join([]string{
		"# header",
		"docker.io/kindest/node:v1.37.0@" + dA,
		"docker.io/kindest/kindnetd:v1 preloaded-in docker.io/kindest/node:v1.37.0@" + dA,
		"127.0.0.1:5000/team/app:1.2 pending # resolved on a connected machine",
		"",
	}, "\n")
	inv, problems := Parse([]byte(src))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	es := inv.Entries()
	if len(es) != 3 {
		t.Fatalf("entries: %+v", es)
	}
	if es[0].Pinned() != "docker.io/kindest/node:v1.37.0@"+dA || es[1].PreloadedIn == "" || !es[2].Pending || es[2].Line != 4 {
		t.Fatalf("entries: %+v", es)
	}
	if e, ok := inv.Lookup("127.0.0.1:5000/team/app:1.2@" + dB); !ok || e.Image != "127.0.0.1:5000/team/app:1.2" {
		t.Fatalf("Lookup ignoring the digest: %+v %v", e, ok)
	}
	if p := inv.Pending(); len(p) != 1 || p[0].Image != "127.0.0.1:5000/team/app:1.2" {
		t.Fatalf("Pending: %+v", p)
	}
}

func TestParseRejects(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"tag only":            {"ghcr.io/x/y:v1", "has no digest"},
		"short digest":        {"ghcr.io/x/y:v1@sha256:abc", "has no digest"},
		"no tag":              {"ghcr.io/x/y@" + dA, "has no tag"},
		"port is not a tag":   {"127.0.0.1:5000/y pending", "has no tag"},
		"unknown word":        {"ghcr.io/x/y:v1 maybe", "is not one of"},
		"twice":               {"ghcr.io/x/y:v1 pending\nghcr.io/x/y:v1@" + dA, "listed twice (first on line 1)"},
		"preload of unpinned": {"a/b:1 preloaded-in c/d:2@" + dA, "not itself in the inventory"},
	} {
		t.Run(name, func(t *testing.T) {
			_, problems := Parse([]byte(tc.src))
			if len(problems) != 1 || !strings.Contains(problems[0].Error(), tc.want) {
				t.Fatalf("want one problem containing %q, got %v", tc.want, problems)
			}
		})
	}
}

func TestPinRewritesOnlyThatLine(t *testing.T) {
	src := "# keep me\nghcr.io/x/y:v1 pending # why\n\nghcr.io/x/z:v2@" + dA + "\n"
	inv, problems := Parse([]byte(src))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	if err := inv.Pin("ghcr.io/x/y:v1", dB); err != nil {
		t.Fatal(err)
	}
	want := "# keep me\nghcr.io/x/y:v1@" + dB + " # why\n\nghcr.io/x/z:v2@" + dA + "\n"
	if got := string(inv.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	again, problems := Parse(inv.Bytes())
	if len(problems) != 0 || len(again.Pending()) != 0 {
		t.Fatalf("re-read: %v %+v", problems, again.Pending())
	}
	if err := inv.Pin("ghcr.io/x/none:v1", dB); err == nil || !strings.Contains(err.Error(), "not in the inventory") {
		t.Fatalf("pin of an unknown image: %v", err)
	}
	if err := inv.Pin("ghcr.io/x/y:v1", "sha256:12"); err == nil {
		t.Fatal("a malformed digest was accepted")
	}
}
