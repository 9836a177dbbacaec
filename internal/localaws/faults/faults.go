package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrInvalidConfig is wrapped by the errors of New and SetRules for bad rules.
var ErrInvalidConfig = errors.New("faults: invalid config")

// Kind is a kind of fault.
type Kind int

// The kinds of fault. Error kinds answer with the status and JSON body AWS
// uses (`{"__type": code, "message": ...}` plus the X-Amzn-Errortype header);
// the request never reaches the server.
const (
	// Throughput answers 400 ProvisionedThroughputExceededException.
	Throughput Kind = iota + 1
	// LimitExceeded answers 400 LimitExceededException.
	LimitExceeded
	// ExpiredIterator answers 400 ExpiredIteratorException (GetRecords).
	ExpiredIterator
	// InternalFailure answers 500 InternalFailure.
	InternalFailure
	// ServiceUnavailable answers 503 ServiceUnavailable.
	ServiceUnavailable
	// DropRequest fails the round trip with "connection reset by peer"
	// without sending the request: the server never sees it. The SDK's
	// standard retryer retries it.
	DropRequest
	// DropResponse sends the request, so the server acts on it, then cuts
	// the response body half way with io.ErrUnexpectedEOF, as a connection
	// closed mid-body would. The SDK reports a *smithy.DeserializationError
	// and does not retry it.
	DropResponse
	// RequestTimeout answers 408 Request Timeout with an empty body, as a
	// server or load balancer does when it gave up waiting: the SDK reports
	// an unmodeled API error with HTTP status 408. The request never reaches
	// the server. With Rule.Delay, it models a long hang that ends in 408.
	RequestTimeout
	// Hang holds the request, unsent, until its context ends (the caller's
	// timeout), then fails the round trip with the context's error: a
	// connection that went silent.
	Hang
	// TransactionConflict answers 400 TransactionConflictException, as
	// DynamoDB answers a PutItem or UpdateItem of an item an ongoing
	// TransactWriteItems holds. The request never reaches the server.
	TransactionConflict
	// AccessDenied answers 400 AccessDeniedException, as AWS answers a
	// call the credentials' IAM policy does not allow. The request never
	// reaches the server.
	AccessDenied
	lastKind = AccessDenied
)

// String names the kind, as in the constants above.
func (k Kind) String() string {
	names := [...]string{"Kind(0)", "Throughput", "LimitExceeded", "ExpiredIterator",
		"InternalFailure", "ServiceUnavailable", "DropRequest", "DropResponse", "RequestTimeout", "Hang",
		"TransactionConflict", "AccessDenied"}
	if k < 0 || k > lastKind {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return names[k]
}

// apiError returns the HTTP status and AWS error code of an error kind.
func (k Kind) apiError() (status int, code, message string) {
	switch k {
	case Throughput:
		return 400, "ProvisionedThroughputExceededException", "Rate exceeded (injected by faults)"
	case LimitExceeded:
		return 400, "LimitExceededException", "Rate exceeded (injected by faults)"
	case ExpiredIterator:
		return 400, "ExpiredIteratorException", "Iterator expired (injected by faults)"
	case InternalFailure:
		return 500, "InternalFailure", "Internal failure (injected by faults)"
	case RequestTimeout:
		return 408, "", ""
	case TransactionConflict:
		return 400, "TransactionConflictException", "Transaction is ongoing for the item (injected by faults)"
	case AccessDenied:
		return 400, "AccessDeniedException", "Not authorized to perform this action (injected by faults)"
	default:
		return 503, "ServiceUnavailable", "Service unavailable (injected by faults)"
	}
}

// Rule says which requests get which fault.
type Rule struct {
	// Operation restricts the rule to one operation, named as in the
	// X-Amz-Target header, either bare ("GetRecords") or in full
	// ("Kinesis_20131202.GetRecords"). Empty (the default) matches every request.
	Operation string
	// Kind is the fault to inject. Required.
	Kind Kind
	// Probability is the chance, in [0, 1], that a matching request gets the
	// fault; 0 (the default) means 1, every matching request.
	Probability float64
	// Skip lets the first Skip matching requests through untouched. Default 0.
	Skip int
	// Times caps how many faults this rule injects; 0 (the default) means no cap.
	Times int
	// Delay holds a request this rule fires on for this long (on the
	// runtime's clock, so virtual under testing/synctest) before its fault
	// is injected; a request whose context ends first fails with the
	// context's error. Default 0: no delay.
	Delay time.Duration
}

// validate reports every problem with r, the i-th rule.
func (r Rule) validate(i int) []error {
	var problems []error
	if r.Kind < Throughput || r.Kind > lastKind {
		problems = append(problems, fmt.Errorf("Rules[%d].Kind %d: must be one of Throughput..AccessDenied", i, r.Kind))
	}
	if r.Probability < 0 || r.Probability > 1 || r.Probability != r.Probability {
		problems = append(problems, fmt.Errorf("Rules[%d].Probability %v: must be in [0, 1]", i, r.Probability))
	}
	if r.Skip < 0 {
		problems = append(problems, fmt.Errorf("Rules[%d].Skip %d: must be >= 0", i, r.Skip))
	}
	if r.Times < 0 {
		problems = append(problems, fmt.Errorf("Rules[%d].Times %d: must be >= 0 (0 means no cap)", i, r.Times))
	}
	if r.Delay < 0 {
		problems = append(problems, fmt.Errorf("Rules[%d].Delay %v: must be >= 0 (0 means none)", i, r.Delay))
	}
	return problems
}

// matches reports whether the rule applies to the operation target.
func (r Rule) matches(target string) bool {
	return r.Operation == "" || r.Operation == target || r.Operation == operation(target)
}

// Config configures a Transport.
type Config struct {
	// Base carries the requests that get no fault, and DropResponse ones.
	// Nil (the default) means a clone of http.DefaultTransport that never
	// uses a proxy.
	Base http.RoundTripper
	// Seed seeds the generator behind Rule.Probability, so a run can be
	// repeated. Default 0, a seed like any other.
	Seed uint64
	// Rules are tried in order for each request; the first that fires wins.
	// Empty (the default) injects nothing until SetRules.
	Rules []Rule
}

// ruleState is a rule and its counters.
type ruleState struct {
	Rule
	matched  int // matching requests seen
	injected int // faults injected
}

// key counts injections per operation and kind.
type key struct {
	op   string
	kind Kind
}

// Transport is an http.RoundTripper, and an SDK HTTP client (it has Do),
// that injects faults by rule. It is safe for concurrent use.
type Transport struct {
	base   http.RoundTripper
	client *http.Client // wraps the Transport itself, for Do

	mu       sync.Mutex
	rng      *rand.Rand
	rules    []ruleState
	injected map[key]int    // guarded by mu
	requests map[string]int // per operation, guarded by mu
	changed  chan struct{}  // closed and replaced at every injection, guarded by mu
}

// New returns a Transport for cfg, or an error wrapping ErrInvalidConfig that
// lists every bad rule.
func New(cfg Config) (*Transport, error) {
	base := cfg.Base
	if base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		base = tr
	}
	t := &Transport{
		base:     base,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		injected: map[key]int{},
		requests: map[string]int{},
		changed:  make(chan struct{}),
	}
	t.client = &http.Client{Transport: t}
	if err := t.SetRules(cfg.Rules...); err != nil {
		return nil, err
	}
	return t, nil
}

// SetRules replaces the rules, with fresh Skip and Times counters; the totals
// of Injected and Requests are kept. On error the rules are unchanged.
func (t *Transport) SetRules(rules ...Rule) error {
	var problems []error
	for i, r := range rules {
		problems = append(problems, r.validate(i)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	states := make([]ruleState, len(rules))
	for i, r := range rules {
		states[i] = ruleState{Rule: r}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rules = states
	return nil
}

// Injected returns how many faults of kind k were injected into operation op.
// An empty op counts every operation; a zero k counts every kind. op is the
// bare name, e.g. "GetRecords".
func (t *Transport) Injected(op string, k Kind) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for key, c := range t.injected {
		if (op == "" || key.op == op) && (k == 0 || key.kind == k) {
			n += c
		}
	}
	return n
}

// WaitInjected waits until at least n faults of kind k were injected into
// operation op (counted as by Injected), or ctx ends. A Hang counts when the
// request is held: a test can then end it by ending its context, e.g. by
// advancing the manual clock that times the call.
func (t *Transport) WaitInjected(ctx context.Context, op string, k Kind, n int) error {
	for {
		t.mu.Lock()
		ch := t.changed
		t.mu.Unlock()
		if t.Injected(op, k) >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("faults: %d %v faults injected into %q, want %d: %w", t.Injected(op, k), k, op, n, context.Cause(ctx))
		}
	}
}

// Requests returns how many requests for operation op (bare name, or "" for
// all) went through the transport, faulty or not.
func (t *Transport) Requests(op string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op != "" {
		return t.requests[op]
	}
	n := 0
	for _, c := range t.requests {
		n += c
	}
	return n
}

// Do sends req through the transport, as an http.Client would; it makes the
// Transport usable as the HTTPClient of an SDK client.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	return t.client.Do(req)
}

// RoundTrip implements http.RoundTripper: it injects the fault of the first
// rule that fires, or forwards req to the base transport.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	kind, delay := t.pick(target)
	if kind != 0 && delay > 0 {
		if err := wait(req, delay); err != nil {
			return nil, err
		}
	}
	switch kind {
	case 0:
		return t.base.RoundTrip(req)
	case Hang:
		if req.Body != nil {
			_ = req.Body.Close()
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	case DropResponse:
		return t.cutResponse(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if kind == DropRequest {
		return nil, &net.OpError{Op: "read", Net: "tcp", Addr: fakeAddr(req.URL.Host),
			Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	return errorResponse(req, kind), nil
}

// wait holds req for d, or until its context ends (then it returns the
// context's error).
func wait(req *http.Request, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-req.Context().Done():
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return req.Context().Err()
	}
}

// pick counts the request and returns the kind of fault to inject, or 0,
// and the rule's delay.
func (t *Transport) pick(target string) (Kind, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	op := operation(target)
	t.requests[op]++
	for i := range t.rules {
		r := &t.rules[i]
		if !r.matches(target) {
			continue
		}
		r.matched++
		if r.matched <= r.Skip || (r.Times > 0 && r.injected >= r.Times) {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && t.rng.Float64() >= r.Probability {
			continue
		}
		r.injected++
		t.injected[key{op, r.Kind}]++
		close(t.changed)
		t.changed = make(chan struct{})
		return r.Kind, r.Delay
	}
	return 0, 0
}

// cutResponse forwards req and returns its response with the body cut half
// way by io.ErrUnexpectedEOF.
func (t *Transport) cutResponse(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = &cutBody{r: bytes.NewReader(body[:len(body)/2])}
	return resp, nil
}

// cutBody yields its bytes, then io.ErrUnexpectedEOF.
type cutBody struct{ r *bytes.Reader }

// Read implements io.Reader.
func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Close implements io.Closer.
func (b *cutBody) Close() error { return nil }

// errorResponse builds the AWS JSON error response of kind.
func errorResponse(req *http.Request, kind Kind) *http.Response {
	status, code, message := kind.apiError()
	var body []byte
	if code != "" {
		body, _ = json.Marshal(map[string]string{"__type": code, "message": message})
	}
	contentType := req.Header.Get("Content-Type")
	if !strings.HasPrefix(contentType, "application/x-amz-json") {
		contentType = "application/x-amz-json-1.1"
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if code != "" {
		h.Set("X-Amzn-Errortype", code)
	}
	h.Set("X-Amzn-Requestid", "injected-by-faults")
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// operation returns the bare operation name of an X-Amz-Target value.
func operation(target string) string {
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// fakeAddr is the remote address reported by a dropped connection.
type fakeAddr string

// Network implements net.Addr.
func (fakeAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a fakeAddr) String() string { return string(a) }
