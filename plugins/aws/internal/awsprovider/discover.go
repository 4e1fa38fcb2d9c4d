package awsprovider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/smithy-go"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Global is the region of account-wide resources (IAM, S3 names).
const Global = "global"

// emitter serialises events from concurrent scanners and stops them all
// once the host has gone.
type emitter struct {
	mu     sync.Mutex
	emit   func(sdk.DiscoverEvent) error
	err    error
	cancel context.CancelFunc
}

func (e *emitter) send(ev sdk.DiscoverEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	if err := e.emit(ev); err != nil {
		e.err = err
		e.cancel()
	}
}

func (e *emitter) resource(r sdk.Resource) { e.send(sdk.DiscoverEvent{Resource: &r}) }

func (e *emitter) suspect(r sdk.Resource) { e.send(sdk.DiscoverEvent{Suspect: &r}) }

func (e *emitter) failed(kind, region string, err error) {
	e.send(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: kind, Region: region, Message: err.Error()}})
}

// Discover lists everything krops owns for the configured targets: per
// region concurrently, and the account-wide resources alongside. A query
// that fails is reported for its kind and region; it never reads as empty.
func (p *Provider) Discover(ctx context.Context, emit func(sdk.DiscoverEvent) error) error {
	account, err := p.checkedAccount(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &emitter{emit: emit, cancel: cancel}
	e.send(sdk.DiscoverEvent{Scope: &sdk.Scope{Account: account, Regions: p.s.regions()}})
	p.scan(ctx, account, e)
	if e.err != nil {
		return e.err
	}
	return ctx.Err()
}

// scan runs every kind's scanner concurrently: the per-target ones for each
// target, the account-wide ones once. Their number is bounded by the
// configuration (a few per cluster plus a few account-wide), so no
// further limit is needed; the SDK's adaptive retryer slows down if AWS
// throttles.
func (p *Provider) scan(ctx context.Context, account string, e *emitter) {
	var fns []func()
	for _, region := range p.s.regions() {
		for _, t := range p.s.targetsIn(region) {
			for _, k := range registryOrder {
				if k.scanTarget != nil {
					fns = append(fns, func() { k.scanTarget(p, ctx, t, e) })
				}
			}
		}
	}
	for _, k := range registryOrder {
		if k.scanAccount != nil {
			fns = append(fns, func() { k.scanAccount(p, ctx, account, e) })
		}
	}
	p.parallel(fns...)
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func evidenceName(key, value string) string {
	return fmt.Sprintf("exact name %s from bootstrap.toml %s", value, key)
}

// parallel runs fns concurrently, or one after another when the provider
// is in sequential mode (the benchmarks' baseline).
func (p *Provider) parallel(fns ...func()) {
	if p.o.Sequential {
		for _, f := range fns {
			f()
		}
		return
	}
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}
