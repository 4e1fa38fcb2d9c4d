// Package imageinventory reads and edits airgap/images.txt, the list of every
// container image the trees and the air-gap package need.
//
// One image per line, in one of three forms:
//
//	repo:tag@sha256:<64 hex>                 pinned
//	repo:tag preloaded-in <pinned image>     ships inside another pinned image
//	repo:tag pending                         digest not yet resolved
//
// "pending" exists because digests can only be read from a registry, and the
// machines that write the trees may not reach one: the entry records the
// image so nothing is forgotten, krops-airgap pin resolves it on a machine
// that can, and no package is built while any entry is pending. Blank lines
// and lines starting with # are kept as they are.
package imageinventory

import (
	"fmt"
	"regexp"
	"strings"
)

// Entry is one image line.
type Entry struct {
	// Line is the 1-based line number in the file.
	Line int
	// Image is repo:tag.
	Image string
	// Digest is sha256:<hex> for a pinned entry.
	Digest string
	// PreloadedIn is the pinned image this one ships inside.
	PreloadedIn string
	// Pending marks an entry whose digest is not yet known.
	Pending bool
}

// Pinned returns repo:tag@sha256:<hex>, or "" when the entry has no digest.
func (e Entry) Pinned() string {
	if e.Digest == "" {
		return ""
	}
	return e.Image + "@" + e.Digest
}

// Problem is a line that could not be read.
type Problem struct {
	Line    int
	Message string
}

func (p Problem) Error() string { return fmt.Sprintf("line %d: %s", p.Line, p.Message) }

// Inventory is a parsed images.txt that can be written back unchanged apart
// from the entries pinned through it.
type Inventory struct {
	lines   []string
	entries []Entry
}

var (
	digestRef = regexp.MustCompile(`^(\S+)@(sha256:[0-9a-f]{64})$`)
	hexDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// SplitTag splits repo:tag, where repo may carry a registry port
// (127.0.0.1:5000/x:tag). ok is false when there is no tag.
func SplitTag(image string) (repo, tag string, ok bool) {
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash || colon == len(image)-1 {
		return image, "", false
	}
	return image[:colon], image[colon+1:], true
}

// Parse reads an inventory. Every unreadable line is reported; the entries
// that could be read are returned either way.
func Parse(b []byte) (*Inventory, []Problem) {
	inv := &Inventory{lines: strings.Split(string(b), "\n")}
	var problems []Problem
	seen := map[string]int{}
	for i, raw := range inv.lines {
		n := i + 1
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if c := strings.Index(line, " #"); c >= 0 {
			line = strings.TrimSpace(line[:c])
		}
		f := strings.Fields(line)
		var e Entry
		switch {
		case len(f) == 1:
			m := digestRef.FindStringSubmatch(f[0])
			if m == nil {
				problems = append(problems, Problem{n, fmt.Sprintf("%q has no digest: write repo:tag@sha256:<64 hex>, or repo:tag pending until krops-airgap pin resolves it", f[0])})
				continue
			}
			e = Entry{Line: n, Image: m[1], Digest: m[2]}
		case len(f) == 2 && f[1] == "pending":
			e = Entry{Line: n, Image: f[0], Pending: true}
		case len(f) == 3 && f[1] == "preloaded-in":
			if digestRef.FindStringSubmatch(f[2]) == nil {
				problems = append(problems, Problem{n, fmt.Sprintf("%s is preloaded in %q, which is not repo:tag@sha256:<64 hex>", f[0], f[2])})
				continue
			}
			e = Entry{Line: n, Image: f[0], PreloadedIn: f[2]}
		default:
			problems = append(problems, Problem{n, fmt.Sprintf("%q is not one of: repo:tag@sha256:<64 hex>; repo:tag pending; repo:tag preloaded-in <pinned image>", line)})
			continue
		}
		if _, _, ok := SplitTag(e.Image); !ok {
			problems = append(problems, Problem{n, fmt.Sprintf("%q has no tag: the tag is what a reader recognises, the digest what pins it", e.Image)})
			continue
		}
		if prev, dup := seen[e.Image]; dup {
			problems = append(problems, Problem{n, fmt.Sprintf("%s is listed twice (first on line %d)", e.Image, prev)})
			continue
		}
		seen[e.Image] = n
		inv.entries = append(inv.entries, e)
	}
	pinned := map[string]bool{}
	for _, e := range inv.entries {
		if e.Digest != "" {
			pinned[e.Pinned()] = true
		}
	}
	for _, e := range inv.entries {
		if e.PreloadedIn != "" && !pinned[e.PreloadedIn] {
			problems = append(problems, Problem{e.Line, fmt.Sprintf("%s is preloaded in %s, which is not itself in the inventory with that digest", e.Image, e.PreloadedIn)})
		}
	}
	return inv, problems
}

// Entries returns the entries in file order.
func (inv *Inventory) Entries() []Entry { return append([]Entry(nil), inv.entries...) }

// Lookup finds the entry for repo:tag, ignoring any digest on the argument.
func (inv *Inventory) Lookup(image string) (Entry, bool) {
	base, _, _ := strings.Cut(image, "@")
	for _, e := range inv.entries {
		if e.Image == base {
			return e, true
		}
	}
	return Entry{}, false
}

// Pending returns the entries still waiting for a digest.
func (inv *Inventory) Pending() []Entry {
	var out []Entry
	for _, e := range inv.entries {
		if e.Pending {
			out = append(out, e)
		}
	}
	return out
}

// Pin records digest for image, replacing a pending or older pinned line in
// place (a trailing comment is kept).
func (inv *Inventory) Pin(image, digest string) error {
	if !hexDigest.MatchString(digest) {
		return fmt.Errorf("pin %s: %q is not sha256:<64 hex>", image, digest)
	}
	for i, e := range inv.entries {
		if e.Image != image {
			continue
		}
		if e.PreloadedIn != "" {
			return fmt.Errorf("pin %s: it is preloaded in %s and takes that image's digest", image, e.PreloadedIn)
		}
		comment := ""
		if c := strings.Index(inv.lines[e.Line-1], " #"); c >= 0 {
			comment = inv.lines[e.Line-1][c:]
		}
		inv.lines[e.Line-1] = image + "@" + digest + comment
		inv.entries[i].Digest, inv.entries[i].Pending = digest, false
		return nil
	}
	return fmt.Errorf("pin %s: not in the inventory", image)
}

// Bytes returns the file content, with pinned entries rewritten.
func (inv *Inventory) Bytes() []byte { return []byte(strings.Join(inv.lines, "\n")) }
