package sdk_test

import (
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/kropsdev/krops/plugins/sdk/proto/providerv1"
)

// TestGeneratedCodeMatchesTheProto catches a .proto edited without
// `task proto`: every rpc, message field and enum value written in the
// .proto must be in the committed generated code, and nothing else.
func TestGeneratedCodeMatchesTheProto(t *testing.T) {
	src, err := os.ReadFile("proto/krops/provider/v1/provider.proto")
	if err != nil {
		t.Fatal(err)
	}
	var fromProto []string
	for _, m := range regexp.MustCompile(`(?m)^\s*rpc (\w+)\(`).FindAllStringSubmatch(string(src), -1) {
		fromProto = append(fromProto, "rpc "+m[1])
	}
	for _, re := range []string{`(?:repeated )?(?:map<[^>]+>|[\w.]+) (\w+) = (\d+);`, `(?m)^\s*([A-Z][A-Z0-9_]+) = (\d+);`} {
		for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(string(src), -1) {
			fromProto = append(fromProto, m[1]+"="+m[2])
		}
	}
	var generated []string
	fd := pb.File_krops_provider_v1_provider_proto
	svc := fd.Services().Get(0)
	for i := range svc.Methods().Len() {
		generated = append(generated, "rpc "+string(svc.Methods().Get(i).Name()))
	}
	var walk func(msgs protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			m := msgs.Get(i)
			if m.IsMapEntry() {
				continue
			}
			for j := range m.Fields().Len() {
				f := m.Fields().Get(j)
				generated = append(generated, string(f.Name())+"="+itoa(int(f.Number())))
			}
			walk(m.Messages())
		}
	}
	walk(fd.Messages())
	for i := range fd.Enums().Len() {
		e := fd.Enums().Get(i)
		for j := range e.Values().Len() {
			v := e.Values().Get(j)
			generated = append(generated, string(v.Name())+"="+itoa(int(v.Number())))
		}
	}
	sort.Strings(fromProto)
	sort.Strings(generated)
	if strings.Join(fromProto, "\n") != strings.Join(generated, "\n") {
		t.Errorf("generated code differs from provider.proto: run `task proto` and commit.\nproto:\n%s\ngenerated:\n%s", strings.Join(fromProto, " "), strings.Join(generated, " "))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
