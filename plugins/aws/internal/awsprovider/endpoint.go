package awsprovider

import (
	"errors"
	"net"
	"net/url"
)

// unansweredEndpoint reports the scheme://host of a request that never got
// an HTTP answer (refused, unresolvable, or accepted and silent until the
// per-attempt timeout), and whether it was the silent kind. An AWS error
// response is not a transport failure: it returns "".
func unansweredEndpoint(err error) (endpoint string, silent bool) {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return "", false
	}
	endpoint = ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		// The path and query carry nothing the user needs, and presigned
		// or query-string requests could carry more than they should.
		endpoint = u.Scheme + "://" + u.Host
	}
	var ne net.Error
	return endpoint, ue.Timeout() || (errors.As(err, &ne) && ne.Timeout())
}

// rootCause is the innermost error's text: the SDK's wrapping repeats the
// operation and the URL, already named by the caller.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
