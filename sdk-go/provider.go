package converge

import (
	"context"
	"fmt"
	"strings"
)

// Provider is handler code for one (kind, kind_version).
//
// A provider handles every reaction of its kind (switch on ReactionRequest.Reaction or
// Stage when a kind declares several). It has no setup hook: it connects to its own
// dependencies and reports the result through the optional [ReadinessReporter].
type Provider interface {
	// Kind is the pair this provider serves. It must be pure; the version starts at 1.
	Kind() KindVersion
	// Work runs one task. Return an error made with Terminal to stop retries until the
	// spec changes; any other error (or a panic) is transient. ctx is cancelled when the
	// task's deadline passes, the broker cancels the task, or the worker stops.
	Work(ctx context.Context, req *ReactionRequest) (*Outcome, error)
}

// ConfigReceiver is implemented by providers that want the kind's default provider
// config. OnConfig is called when it is first loaded and on every push; an empty config
// means it was deleted (or never existed). It must not block for long.
type ConfigReceiver interface {
	OnConfig(cfg ProviderConfig)
}

// ReadinessReporter is implemented by providers whose readiness can change. Ready is
// polled periodically (and right after each config push); a flip tells the broker to stop
// (or resume) sending this kind's tasks to this worker. Providers without it are always
// ready.
type ReadinessReporter interface {
	Ready() bool
}

// WorkFunc is the signature of Provider.Work.
type WorkFunc func(ctx context.Context, req *ReactionRequest) (*Outcome, error)

type funcProvider struct {
	kv   KindVersion
	work WorkFunc
}

func (p funcProvider) Kind() KindVersion { return p.kv }

func (p funcProvider) Work(ctx context.Context, req *ReactionRequest) (*Outcome, error) {
	return p.work(ctx, req)
}

// ProviderFunc adapts a function into a Provider for kv (always ready, ignores configs).
func ProviderFunc(kv KindVersion, work WorkFunc) Provider {
	return funcProvider{kv: kv, work: work}
}

// registry is the validated set of providers a worker serves, in registration order.
type registry struct {
	entries []registered
	byKV    map[KindVersion]int
}

type registered struct {
	kv KindVersion
	p  Provider
}

func (r *registry) find(kv KindVersion) (registered, bool) {
	i, ok := r.byKV[kv]
	if !ok {
		return registered{}, false
	}
	return r.entries[i], true
}

// newRegistry checks the providers can be served and applies the WORKER_KINDS filter.
func newRegistry(providers []Provider, filter []string) (*registry, error) {
	r := &registry{byKV: make(map[KindVersion]int)}
	served := make(map[string]bool)
	for _, p := range providers {
		if p == nil {
			return nil, fmt.Errorf("converge: a provider is nil")
		}
		kv := p.Kind()
		if kv.Kind == "" {
			return nil, fmt.Errorf("converge: a provider has an empty kind")
		}
		if kv.Version < 1 {
			return nil, fmt.Errorf("converge: provider for kind %q has version %d; versions start at 1", kv.Kind, kv.Version)
		}
		if _, dup := r.byKV[kv]; dup {
			return nil, fmt.Errorf("converge: %s is registered twice", kv)
		}
		r.byKV[kv] = len(r.entries)
		r.entries = append(r.entries, registered{kv: kv, p: p})
		served[kv.Kind] = true
	}
	if filter != nil {
		var unknown []string
		keep := make(map[string]bool)
		for _, k := range filter {
			keep[k] = true
			if !served[k] {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			return nil, fmt.Errorf("converge: WORKER_KINDS names kinds no provider serves: %s", strings.Join(unknown, ", "))
		}
		kept := &registry{byKV: make(map[KindVersion]int)}
		for _, e := range r.entries {
			if keep[e.kv.Kind] {
				kept.byKV[e.kv] = len(kept.entries)
				kept.entries = append(kept.entries, e)
			}
		}
		r = kept
	}
	if len(r.entries) == 0 {
		return nil, fmt.Errorf("converge: no providers registered")
	}
	return r, nil
}
