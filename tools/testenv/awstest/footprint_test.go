package awstest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/kropsdev/krops/tools/testenv"
)

// A connection dropped in the middle of a response (what moto's server now
// and then does) makes Build start over on a reset moto, and the footprint
// it returns is exactly what moto holds: no resource from the broken attempt
// is left behind unrecorded.
func TestBuildStartsOverAfterADroppedConnection(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{KeepEnv: true})
	proxy := testenv.NewFaultProxy(t, m.URL)
	proxy.Add(testenv.Rule{Action: "AllocateAddress", Times: 1, Respond: func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: 4096\r\n\r\n<AllocateAddressResponse>")
		_ = buf.Flush()
		conn.Close()
	}})
	fp := Build(t, proxy.URL, Options{})

	eips := 0
	for _, region := range []string{"eu-north-1", "eu-west-1"} {
		out, err := ec2.NewFromConfig(config(t, m.URL, region)).DescribeAddresses(context.Background(), &ec2.DescribeAddressesInput{})
		if err != nil {
			t.Fatal(err)
		}
		eips += len(out.Addresses)
	}
	recorded := 0
	for _, r := range append(fp.Sorted(), fp.Decoys...) {
		if strings.HasPrefix(r, "elastic-ip ") {
			recorded++
		}
	}
	if eips == 0 || eips != recorded {
		t.Fatalf("moto holds %d Elastic IPs, the footprint records %d", eips, recorded)
	}
	dropped := 0
	for _, a := range proxy.Actions() {
		if a == "AllocateAddress" {
			dropped++
		}
	}
	if dropped <= recorded {
		t.Fatalf("AllocateAddress was called %d times for %d addresses: the dropped call never happened", dropped, recorded)
	}
}
