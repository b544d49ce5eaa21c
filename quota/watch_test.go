package quota

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// decisionWatch is a go-redis hook that watches the reserve script: how
// many single decisions fast.lua took (its reply is a string) and how many
// reserve.lua took (a list), and how many decisions each pipeline carried.
type decisionWatch struct {
	fast, general atomic.Int64

	mu    sync.Mutex
	sizes []int
}

// isDecision reports whether cmd runs the reserve script, in either form,
// by its hash.
func isDecision(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 1 && (args[1] == reserveScript.Hash() || args[1] == lean[reserveScript].Hash())
}

func (w *decisionWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *decisionWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(*redis.Cmd)
		if !ok || err != nil || !isDecision(cmd) {
			return err
		}
		switch c.Val().(type) {
		case string:
			w.fast.Add(1)
		case []any:
			w.general.Add(1)
		}
		return err
	}
}

func (w *decisionWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isDecision(c) {
				n++
			}
		}
		w.mu.Lock()
		w.sizes = append(w.sizes, n)
		w.mu.Unlock()
		return next(ctx, cmds)
	}
}

// largest returns the most decisions any pipeline carried.
func (w *decisionWatch) largest() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	most := 0
	for _, n := range w.sizes {
		most = max(most, n)
	}
	return most
}
