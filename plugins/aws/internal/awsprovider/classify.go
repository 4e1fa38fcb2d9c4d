package awsprovider

import (
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// notFoundCodes mean the resource is gone: a named lookup said so. EC2
// codes ending in .NotFound mean the same (isNotFound).
var notFoundCodes = map[string]bool{
	"InvalidVpcID.NotFound": true, "InvalidSubnetID.NotFound": true, "InvalidGroup.NotFound": true,
	"InvalidRouteTableID.NotFound": true, "InvalidInternetGatewayID.NotFound": true, "InvalidAllocationID.NotFound": true,
	"NatGatewayNotFound": true, "InvalidNatGatewayID.NotFound": true, "ResourceNotFoundException": true,
	"DBInstanceNotFound": true, "DBInstanceNotFoundFault": true, "NoSuchBucket": true, "NoSuchEntity": true,
}

// retryCodes mean "not yet": a dependency still exists or the resource is
// in a transitional state. The next pass tries again.
var retryCodes = map[string]bool{
	"DependencyViolation": true, "ResourceInUseException": true, "InvalidIPAddress.InUse": true,
	"DeleteConflict": true, "InvalidDBInstanceState": true, "InvalidDBInstanceStateFault": true,
	"BucketNotEmpty": true, "IncorrectState": true, "InvalidStateException": true, "OperationAbortedException": true,
}

// isNotFound says a named thing is not there: the resource, or what a
// sub-step of its deletion would have removed (an association, a rule, an
// attachment).
func isNotFound(err error) bool {
	code := apiCode(err)
	return notFoundCodes[code] || strings.HasSuffix(code, ".NotFound") || code == "Gateway.NotAttached" ||
		(code == "ValidationError" && strings.Contains(err.Error(), "does not exist"))
}

// classify turns a call's error into an outcome; done is the outcome of
// success. A NotFound is sweep.Gone: the goal is reached, whoever got there.
func classify(err error, done sweep.Result) sweep.Result {
	if err == nil {
		return done
	}
	code := apiCode(err)
	switch {
	case isNotFound(err):
		return gone
	case retryCodes[code]:
		return result(sweep.Blocked, code+": "+shortErr(err))
	}
	return result(sweep.Failed, shortErr(err))
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "api error "); i >= 0 {
		return s[i+len("api error "):]
	}
	return s
}

var (
	deleted = result(sweep.Deleted, "")
	gone    = result(sweep.Gone, "")
)

// regionOf maps a resource to the region its API lives in.
func (p *Provider) regionOf(r sdk.Resource) string {
	if r.Region == Global || r.Region == "" {
		return p.s.mgmt().Region
	}
	return r.Region
}

func result(o sweep.Outcome, msg string) sweep.Result {
	return sweep.Result{Outcome: o, Message: msg}
}
