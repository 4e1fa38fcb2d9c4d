package awsprovider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// DefaultMaxIdlePasses stops a sweep after this many passes in which
// nothing was deleted and nothing was still being deleted.
const DefaultMaxIdlePasses = sweep.DefaultMaxIdlePasses

// perRegionConcurrency bounds parallel deletions per region: enough to
// overlap slow calls, few enough to stay clear of API rate limits.
const perRegionConcurrency = 8

// Sweep deletes exactly the resources of req.Scope that a fresh discovery
// still finds krops-owned, in dependency order, on the SDK's sweep engine:
// this provider supplies the inventory and how to delete one resource.
func (p *Provider) Sweep(ctx context.Context, req sdk.SweepRequest, emit func(sdk.SweepEvent) error) error {
	if _, err := p.checkedAccount(ctx); err != nil {
		return err
	}
	concurrency := perRegionConcurrency
	if p.o.Sequential {
		concurrency = 1
	}
	poll := p.o.PollInterval
	if poll == 0 {
		poll = -1 // this provider's zero means no pause; the engine's, its default
	}
	_, err := sweep.Run(ctx, req, emit, sweep.Options{
		Inventory:    p.inventory,
		Delete:       p.deleteOne,
		Concurrency:  concurrency,
		FirstPoll:    p.o.FirstPoll,
		PollInterval: poll,
	})
	return err
}

// inventory is a fresh, read-only discovery keyed by kind/id. Any failed
// query aborts: deleting from a partial picture could remove a resource
// whose dependants were not seen.
func (p *Provider) inventory(ctx context.Context) (map[string]sdk.Resource, error) {
	account, err := p.account(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := map[string]sdk.Resource{}
	var failures []string
	var mu sync.Mutex
	e := &emitter{cancel: cancel, emit: func(ev sdk.DiscoverEvent) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Resource != nil:
			out[ev.Resource.Kind+"/"+ev.Resource.ID] = *ev.Resource
		case ev.Error != nil:
			failures = append(failures, fmt.Sprintf("%s in %s: %s", ev.Error.Kind, ev.Error.Region, ev.Error.Message))
		}
		return nil
	}}
	p.scan(ctx, account, e)
	if len(failures) > 0 {
		sort.Strings(failures)
		return nil, fmt.Errorf("%w: re-checking the scope failed: %s", sdk.ErrUnknownState, strings.Join(failures, "; "))
	}
	return out, nil
}
