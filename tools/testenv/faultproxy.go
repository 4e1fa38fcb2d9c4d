package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// FaultProxy sits in front of a real server (moto, a registry, an API server)
// and injects faults: a share of calls failing with a given status and AWS
// error code, selected operations failing or hanging, added latency, denied
// writes. It logs every request (method, path, AWS service and action) so
// tests can assert call order and count, and that nothing mutated.
//
// Use it as a loopback reverse proxy (NewFaultProxy, then point the client at
// URL) or as a client-side transport (Transport), which suits TLS servers
// such as kube-apiserver.
type FaultProxy struct {
	// URL is the proxy's address when started with NewFaultProxy.
	URL string

	target *url.URL
	rp     *httputil.ReverseProxy

	mu    sync.Mutex
	rng   *rand.Rand
	rules []*Rule
	log   []Request
}

// Request is one logged call.
type Request struct {
	Method string
	Path   string
	// Service is the AWS service from the SigV4 scope (ec2, s3, iam, ...);
	// empty for non-AWS calls.
	Service string
	// Action is the AWS action (DescribeVpcs, or "GET /bucket" for REST
	// services); for non-AWS calls it is "METHOD path".
	Action string
	// Mutating is true for calls that may change state.
	Mutating bool
	// AccessKey is the access key id the call was signed with (from the
	// SigV4 credential), so a test can tell whose credentials a program
	// used; empty for unsigned calls.
	AccessKey string
	// Params are the form parameters of query-protocol calls (EC2, IAM,
	// RDS, STS, CloudFormation), so tests can tell which resource a call
	// concerned.
	Params url.Values
	// Injected names the fault answered instead of forwarding, if any.
	Injected string
	At       time.Time
}

// Rule is one fault. A request matches when every set field matches.
type Rule struct {
	// Action matches Request.Action exactly; Service, Method likewise.
	Action, Service, Method string
	// Path matches Request.Path as a regular expression.
	Path string
	// Mutating, when set, restricts the rule to writes (true) or reads.
	Mutating *bool
	// Share of matching calls affected, 0 < Share <= 1; 0 means all.
	Share float64
	// Times caps how often the rule fires; 0 means no cap.
	Times int

	// What happens, checked in this order: Respond, Hang, Status, Delay.
	// Respond answers instead of the upstream (for stand-in answers).
	Respond http.HandlerFunc
	// Hang blocks until the client gives up.
	Hang bool
	// Status and Code answer with an error in the service's wire format
	// (Code is the AWS error code, e.g. Throttling, RequestLimitExceeded).
	Status int
	Code   string
	// Delay is added before forwarding.
	Delay time.Duration

	path  *regexp.Regexp
	fired int
}

// NewFaultProxy starts a loopback reverse proxy to target for t.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	p, err := newFaultProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func newFaultProxy(target string) (*FaultProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("fault proxy target %q: %w", target, err)
	}
	p := &FaultProxy{target: u, rng: rand.New(rand.NewPCG(1, 2))}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // SigV4 signs the Host header
		},
		ErrorLog: discardLogger(),
	}
	return p, nil
}

// Forward sends r on to the proxy's target, for Respond handlers that
// answer some requests themselves and pass the others through.
func (p *FaultProxy) Forward(w http.ResponseWriter, r *http.Request) { p.rp.ServeHTTP(w, r) }

// Raced is a Respond handler for a race with someone else: the upstream
// carries the call out, as if another actor had just done the same thing,
// and the client is told code (a NotFound, typically) instead of success.
func (p *FaultProxy) Raced(status int, code string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := describe(r)
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
		writeAWSError(w, req, status, code)
	}
}

// Add installs a rule; rules are checked in the order added.
func (p *FaultProxy) Add(r Rule) *Rule {
	if r.Path != "" {
		r.path = regexp.MustCompile(r.Path)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rule := r
	p.rules = append(p.rules, &rule)
	return &rule
}

// Throttle fails share of all calls with the given AWS throttling code
// (Throttling, RequestLimitExceeded, SlowDown, ...).
func (p *FaultProxy) Throttle(share float64, code string) *Rule {
	status := http.StatusBadRequest
	if code == "SlowDown" {
		status = http.StatusServiceUnavailable
	}
	return p.Add(Rule{Share: share, Status: status, Code: code})
}

// DenyWrites answers every mutating call with 403 AccessDenied.
func (p *FaultProxy) DenyWrites() *Rule {
	yes := true
	return p.Add(Rule{Mutating: &yes, Status: http.StatusForbidden, Code: "AccessDenied"})
}

// Seed makes the share decisions reproducible with another seed.
func (p *FaultProxy) Seed(a, b uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rng = rand.New(rand.NewPCG(a, b))
}

// Requests returns a copy of the request log.
func (p *FaultProxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...)
}

// Actions returns the logged actions in order.
func (p *FaultProxy) Actions() []string {
	var out []string
	for _, r := range p.Requests() {
		out = append(out, r.Action)
	}
	return out
}

// Mutations returns the logged calls that may change state.
func (p *FaultProxy) Mutations() []Request {
	var out []Request
	for _, r := range p.Requests() {
		if r.Mutating {
			out = append(out, r)
		}
	}
	return out
}

// AssertNoMutation fails t when any mutating call went through the proxy.
func (p *FaultProxy) AssertNoMutation(t testing.TB) {
	t.Helper()
	for _, r := range p.Mutations() {
		t.Errorf("mutating call through the fault proxy: %s %s (%s %s)", r.Method, r.Path, r.Service, r.Action)
	}
}

// Transport wraps base (nil means http.DefaultTransport) so requests sent
// through it are logged and faulted the same way, without a proxy server.
func (p *FaultProxy) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		forwarded := false
		var resp *http.Response
		var err error
		p.handle(rec, req, func(w http.ResponseWriter, r *http.Request) {
			forwarded = true
			resp, err = base.RoundTrip(r)
		})
		if forwarded {
			return resp, err
		}
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		return rec.Result(), nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ServeHTTP makes the proxy an http.Handler.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.handle(w, r, p.rp.ServeHTTP)
}

func (p *FaultProxy) handle(w http.ResponseWriter, r *http.Request, forward http.HandlerFunc) {
	req := describe(r)
	rule := p.match(req)
	if rule != nil {
		switch {
		case rule.Respond != nil:
			req.Injected = "respond"
		case rule.Hang:
			req.Injected = "hang"
		case rule.Status != 0:
			req.Injected = fmt.Sprintf("%d %s", rule.Status, rule.Code)
		}
	}
	p.mu.Lock()
	p.log = append(p.log, req)
	p.mu.Unlock()
	if rule != nil {
		switch {
		case rule.Respond != nil:
			rule.Respond(w, r)
			return
		case rule.Hang:
			<-r.Context().Done()
			return
		case rule.Status != 0:
			writeAWSError(w, req, rule.Status, rule.Code)
			return
		case rule.Delay > 0:
			select {
			case <-time.After(rule.Delay):
			case <-r.Context().Done():
				return
			}
		}
	}
	forward(w, r)
}

func (p *FaultProxy) match(req Request) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.Action != "" && r.Action != req.Action ||
			r.Service != "" && r.Service != req.Service ||
			r.Method != "" && r.Method != req.Method ||
			r.path != nil && !r.path.MatchString(req.Path) ||
			r.Mutating != nil && *r.Mutating != req.Mutating ||
			r.Times > 0 && r.fired >= r.Times {
			continue
		}
		if r.Share > 0 && r.Share < 1 && p.rng.Float64() >= r.Share {
			continue
		}
		r.fired++
		return r
	}
	return nil
}

var sigv4Scope = regexp.MustCompile(`Credential=[^/]+/[0-9]+/[^/]+/([^/]+)/aws4_request`)

// sigv4Key is the access key id of a SigV4 Authorization header.
var sigv4Key = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// readPrefixes are AWS action prefixes that never change state.
var readPrefixes = []string{"Describe", "List", "Get", "Head", "Lookup", "Search", "Select", "Query", "Scan", "Check", "Validate", "Estimate", "Preview"}

// describe identifies the service and action of r. The body is read and
// restored so the upstream still receives it.
func describe(r *http.Request) Request {
	req := Request{Method: r.Method, Path: r.URL.Path, At: time.Now()}
	if m := sigv4Scope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		req.Service = m[1]
	}
	if m := sigv4Key.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		req.AccessKey = m[1]
	}
	switch {
	case r.Header.Get("X-Amz-Target") != "":
		t := r.Header.Get("X-Amz-Target")
		req.Action = t[strings.LastIndex(t, ".")+1:]
	case strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") && r.Body != nil:
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if v, err := url.ParseQuery(string(body)); err == nil {
			req.Action = v.Get("Action")
			req.Params = v
		}
	}
	if req.Action == "" {
		if a := r.URL.Query().Get("Action"); a != "" {
			req.Action = a
		}
	}
	if req.Action != "" {
		req.Mutating = true
		for _, pre := range readPrefixes {
			if strings.HasPrefix(req.Action, pre) {
				req.Mutating = false
			}
		}
		return req
	}
	req.Action = r.Method + " " + r.URL.Path
	req.Mutating = r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	return req
}

// writeAWSError answers in the error format the service's SDK deserializer
// expects, so the SDK sees a real error code (and retries throttling).
func writeAWSError(w http.ResponseWriter, req Request, status int, code string) {
	if code == "" {
		code = http.StatusText(status)
	}
	msg := "injected by testenv.FaultProxy"
	w.Header().Set("X-Amzn-Requestid", "krops-fault")
	switch {
	case req.Service == "ec2":
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>krops-fault</RequestID></Response>`, code, msg)
	case req.Service == "s3":
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>krops-fault</RequestId></Error>`, code, msg)
	case strings.HasPrefix(req.Action, req.Method+" ") || isJSONService(req):
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", code)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
	default: // awsquery: IAM, STS, RDS, CloudFormation
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>krops-fault</RequestId></ErrorResponse>`, code, msg)
	}
}

func isJSONService(req Request) bool {
	switch req.Service {
	case "servicequotas", "tagging", "eks":
		return true
	}
	return false
}
