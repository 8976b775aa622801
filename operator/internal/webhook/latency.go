package webhook

import (
	"context"
	"fmt"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// LatencyInjectedValidator is a test-only fault injector (troubleshooting scenario T9, a
// webhook slower than its timeoutSeconds): it holds every call for delay before handing it
// to next. A delay of 0, the operator's default, returns next unchanged, so production
// composition is untouched. When the caller gives up first (the API server closes the
// connection at its timeout) the call ends with the context's error and next never runs.
func LatencyInjectedValidator[T client.Object](delay time.Duration, next admission.Validator[T]) admission.Validator[T] {
	if delay <= 0 {
		return next
	}
	return latencyValidator[T]{delay: delay, next: next}
}

// LatencyInjectedPatcher is LatencyInjectedValidator for patchers.
func LatencyInjectedPatcher[T client.Object](delay time.Duration, next Patcher[T]) Patcher[T] {
	if delay <= 0 {
		return next
	}
	return latencyPatcher[T]{delay: delay, next: next}
}

// injectDelay sleeps for delay unless ctx ends first.
func injectDelay(ctx context.Context, delay time.Duration) error {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("injected webhook latency of %s interrupted: %w", delay, ctx.Err())
	}
}

type latencyValidator[T client.Object] struct {
	delay time.Duration
	next  admission.Validator[T]
}

func (l latencyValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	if err := injectDelay(ctx, l.delay); err != nil {
		return nil, err
	}
	return l.next.ValidateCreate(ctx, obj)
}

func (l latencyValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	if err := injectDelay(ctx, l.delay); err != nil {
		return nil, err
	}
	return l.next.ValidateUpdate(ctx, oldObj, newObj)
}

func (l latencyValidator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	if err := injectDelay(ctx, l.delay); err != nil {
		return nil, err
	}
	return l.next.ValidateDelete(ctx, obj)
}

type latencyPatcher[T client.Object] struct {
	delay time.Duration
	next  Patcher[T]
}

func (l latencyPatcher[T]) Patch(ctx context.Context, obj T) ([]jsonpatch.JsonPatchOperation, error) {
	if err := injectDelay(ctx, l.delay); err != nil {
		return nil, err
	}
	return l.next.Patch(ctx, obj)
}
