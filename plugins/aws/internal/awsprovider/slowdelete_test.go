package awsprovider

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/kropsdev/krops/tools/testenv"
)

// slowDeletes is a STAND-IN for AWS's asynchronous deletions, which moto
// finishes at once: after a NAT gateway, EKS cluster or nodegroup, or RDS
// instance is deleted, the next polls describe it as still deleting.
type slowDeletes struct {
	mu      sync.Mutex
	pending map[string]int // id -> polls left that answer "deleting"
	polls   int
}

func addSlowDeletes(p *testenv.FaultProxy, polls int, latency time.Duration) {
	s := &slowDeletes{pending: map[string]int{}, polls: polls}
	// A rule answers instead of the proxy's latency rule, so it adds the
	// same latency itself.
	wait := func() { time.Sleep(latency) }
	record := func(id string) {
		s.mu.Lock()
		s.pending[id] = s.polls
		s.mu.Unlock()
	}
	still := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pending[id] > 0 {
			s.pending[id]--
			return true
		}
		return false
	}
	// Deletions are recorded, then forwarded.
	for _, action := range []string{"DeleteNatGateway", "DeleteDBInstance"} {
		p.Add(testenv.Rule{Action: action, Respond: func(w http.ResponseWriter, r *http.Request) {
			wait()
			f := form(r)
			record(f.Get("NatGatewayId") + f.Get("DBInstanceIdentifier"))
			p.Forward(w, r)
		}})
	}
	p.Add(testenv.Rule{Method: http.MethodDelete, Path: "^/clusters/", Respond: func(w http.ResponseWriter, r *http.Request) {
		wait()
		record(r.URL.Path)
		p.Forward(w, r)
	}})
	p.Add(testenv.Rule{Action: "DescribeNatGateways", Respond: func(w http.ResponseWriter, r *http.Request) {
		wait()
		id := form(r).Get("NatGatewayId.1")
		if id == "" || !still(id) {
			p.Forward(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<DescribeNatGatewaysResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>slow</requestId><natGatewaySet><item><natGatewayId>%s</natGatewayId><state>deleting</state></item></natGatewaySet></DescribeNatGatewaysResponse>`, id)
	}})
	p.Add(testenv.Rule{Action: "DescribeDBInstances", Respond: func(w http.ResponseWriter, r *http.Request) {
		wait()
		id := form(r).Get("DBInstanceIdentifier")
		if id == "" || !still(id) {
			p.Forward(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<DescribeDBInstancesResponse xmlns="http://rds.amazonaws.com/doc/2014-10-31/"><DescribeDBInstancesResult><DBInstances><DBInstance><DBInstanceIdentifier>%s</DBInstanceIdentifier><DBInstanceStatus>deleting</DBInstanceStatus><DeletionProtection>false</DeletionProtection></DBInstance></DBInstances></DescribeDBInstancesResult><ResponseMetadata><RequestId>slow</RequestId></ResponseMetadata></DescribeDBInstancesResponse>`, id)
	}})
	p.Add(testenv.Rule{Method: http.MethodGet, Path: "^/clusters/", Respond: func(w http.ResponseWriter, r *http.Request) {
		wait()
		if !still(r.URL.Path) {
			p.Forward(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) == 4 { // clusters/<c>/node-groups/<ng>
			fmt.Fprintf(w, `{"nodegroup": {"clusterName": %q, "nodegroupName": %q, "status": "DELETING"}}`, parts[1], parts[3])
			return
		}
		fmt.Fprintf(w, `{"cluster": {"name": %q, "status": "DELETING"}}`, parts[len(parts)-1])
	}})
}

// form reads a query-protocol body and puts it back for forwarding.
func form(r *http.Request) url.Values {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	v, _ := url.ParseQuery(string(b))
	return v
}
