package runmeta

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 30, 4, 5, 6, 789, time.UTC)

func TestDefaults(t *testing.T) {
	tags, err := New(context.Background(), Options{Environment: "aws", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want := Tags{RunID: "aws-20261130t040506z", Revision: "unknown", ExpiresAt: "2026-12-01T04:05:06Z", RunKind: "manual"}
	if tags != want {
		t.Errorf("tags = %+v, want %+v", tags, want)
	}
}

func TestOverridesAndDiscovery(t *testing.T) {
	discover := func(context.Context) (string, error) { return "abc123\n", nil }
	tags, err := New(context.Background(), Options{Environment: "aws", Now: now, RunID: "ci-42", TTL: "2h", RunKind: "ci", DiscoverRevision: discover})
	if err != nil {
		t.Fatal(err)
	}
	if tags.RunID != "ci-42" || tags.Revision != "abc123" || tags.ExpiresAt != "2026-11-30T06:05:06Z" || tags.RunKind != "ci" {
		t.Errorf("tags = %+v", tags)
	}
	tags, _ = New(context.Background(), Options{Environment: "aws", Now: now, Revision: "given", DiscoverRevision: discover})
	if tags.Revision != "given" {
		t.Errorf("a given revision wins over discovery: %q", tags.Revision)
	}
	failing := func(context.Context) (string, error) { return "", errors.New("offline") }
	tags, _ = New(context.Background(), Options{Environment: "aws", Now: now, DiscoverRevision: failing})
	if tags.Revision != "unknown" {
		t.Errorf("failed discovery gives unknown: %q", tags.Revision)
	}
	tags, _ = New(context.Background(), Options{Environment: "aws", Now: now, TTL: " none "})
	if tags.ExpiresAt != "never" {
		t.Errorf("none gives never: %q", tags.ExpiresAt)
	}
}

func TestTTLGrammar(t *testing.T) {
	good := map[string]time.Duration{
		"": DefaultTTL, "   ": DefaultTTL, "3600": time.Hour, "3600s": time.Hour, "90m": 90 * time.Minute,
		"48h": 48 * time.Hour, " 1h ": time.Hour, "007": 7 * time.Second, "0": 0,
	}
	for in, want := range good {
		ttl, err := ParseTTL(in)
		if err != nil || ttl.Never || ttl.Duration != want {
			t.Errorf("ParseTTL(%q) = %+v, %v; want %v", in, ttl, err, want)
		}
	}
	for _, in := range []string{"-1h", "1.5h", "1h30m", "h", "24x", "never", "None", "+5m", "1e3", "99999999999999999999", "0x10", "2562048h"} {
		if ttl, err := ParseTTL(in); err == nil {
			t.Errorf("ParseTTL(%q) = %+v; want an error", in, ttl)
		} else if !strings.Contains(err.Error(), "KROPS_RUN_TTL") {
			t.Errorf("error for %q does not name KROPS_RUN_TTL: %v", in, err)
		}
	}
}

func TestExpiryPastYear9999IsRejected(t *testing.T) {
	ttl, err := ParseTTL("2562047h") // fits in a Duration, lands in year 2318
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ttl.ExpiresAt(now); err != nil {
		t.Errorf("year 2318 is fine: %v", err)
	}
	late := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
	if _, err := (TTL{Duration: time.Hour}).ExpiresAt(late); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Errorf("want a year-9999 error, got %v", err)
	}
	if s, err := (TTL{Duration: 59 * time.Minute}).ExpiresAt(late); err != nil || s != "9999-12-31T23:59:00Z" {
		t.Errorf("just before the limit: %q, %v", s, err)
	}
}

func TestConfigMapRoundTrip(t *testing.T) {
	tags := Tags{RunID: "r", Revision: "v", ExpiresAt: "never", RunKind: "ci"}
	data := tags.Data()
	if len(data) != 4 {
		t.Fatalf("data has %d keys, want 4", len(data))
	}
	back, err := FromData(data)
	if err != nil || back != tags {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestFromDataRejectsAnythingButExactlyFourNonEmptyKeys(t *testing.T) {
	full := map[string]string{KeyRunID: "r", KeyRevision: "v", KeyExpiresAt: "2026-12-01T00:00:00Z", KeyRunKind: "manual"}
	cases := map[string]func(map[string]string){
		"missing key":   func(m map[string]string) { delete(m, KeyRevision) },
		"empty value":   func(m map[string]string) { m[KeyRunKind] = " " },
		"extra key":     func(m map[string]string) { m["OTHER"] = "x" },
		"bad expiry":    func(m map[string]string) { m[KeyExpiresAt] = "tomorrow" },
		"nil data":      nil,
		"lower-case id": func(m map[string]string) { delete(m, KeyRunID); m["krops_run_id"] = "r" },
	}
	for name, mutate := range cases {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		if mutate == nil {
			m = nil
		} else {
			mutate(m)
		}
		if _, err := FromData(m); err == nil || !strings.Contains(err.Error(), ConfigMapName) {
			t.Errorf("%s: want an error naming %s, got %v", name, ConfigMapName, err)
		}
	}
}

func TestExpired(t *testing.T) {
	for _, tc := range []struct {
		exp  string
		want bool
	}{{"never", false}, {"2026-11-30T04:05:06Z", true}, {"2026-11-30T04:05:07Z", false}, {"2020-01-01T00:00:00Z", true}} {
		got, err := Expired(tc.exp, now.Truncate(time.Second))
		if err != nil || got != tc.want {
			t.Errorf("Expired(%q) = %v, %v; want %v", tc.exp, got, err, tc.want)
		}
	}
	if _, err := Expired("soon", now); err == nil {
		t.Error("an unparseable expiry is an error, never a guess")
	}
}

func FuzzParseTTL(f *testing.F) {
	for _, s := range []string{"", "none", "24h", "-1h", "1.5h", "0007m", "9223372036854775807", " 5s "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ttl, err := ParseTTL(s)
		if err != nil {
			return
		}
		if ttl.Duration < 0 {
			t.Fatalf("ParseTTL(%q) accepted a negative TTL %v", s, ttl.Duration)
		}
		if strings.ContainsAny(s, ".-+") {
			t.Fatalf("ParseTTL(%q) accepted a signed or fractional value", s)
		}
		exp, err := ttl.ExpiresAt(now)
		if err != nil {
			return
		}
		if exp != Never {
			at, perr := time.Parse(time.RFC3339, exp)
			if perr != nil || at.Before(now.Truncate(time.Second)) || at.Year() > 9999 {
				t.Fatalf("ParseTTL(%q) gave expiry %q", s, exp)
			}
		}
	})
}

// The run id is a label on Cluster objects: what cannot be one is refused
// before anything is applied, from KROPS_RUN_ID or from a ConfigMap.
func TestRunIDMustBeALabelValue(t *testing.T) {
	now := time.Date(2026, 12, 1, 19, 13, 33, 0, time.UTC)
	tags, err := New(context.Background(), Options{Environment: "local-host", Now: now})
	if err != nil || tags.RunID != "local-host-20261201t191333z" {
		t.Fatalf("default run id: %q, %v", tags.RunID, err)
	}
	for _, bad := range []string{"local-host-2026-12-01T19:13:33Z", "-leading", "has space", strings.Repeat("x", 64)} {
		_, err := New(context.Background(), Options{Environment: "local-host", Now: now, RunID: bad})
		if err == nil || !strings.Contains(err.Error(), "KROPS_RUN_ID=") || !strings.Contains(err.Error(), "label value") {
			t.Errorf("KROPS_RUN_ID=%q: %v", bad, err)
		}
		_, err = FromData(map[string]string{KeyRunID: bad, KeyRevision: "r", KeyExpiresAt: Never, KeyRunKind: "manual"})
		if err == nil || !strings.Contains(err.Error(), "label value") {
			t.Errorf("ConfigMap with run id %q: %v", bad, err)
		}
	}
	for _, good := range []string{"ci-42", "aws_nightly.3", strings.Repeat("x", 63)} {
		if _, err := New(context.Background(), Options{Environment: "aws", Now: now, RunID: good}); err != nil {
			t.Errorf("KROPS_RUN_ID=%q refused: %v", good, err)
		}
	}
}
