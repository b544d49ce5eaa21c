-- windowsonly.lua: the end of log.lua in the scripts' lean forms, which
-- leave the token buckets' code out (scripts.go: lean): a call that names
-- no bucket is spared making its two dozen functions.
--
-- Provides: limit(), log.lua's for a window, refusing a bucket's span.
-- Needs: log.lua.
--
-- The limiter sends a bucket's span only to the full scripts; this is the
-- check that it did, so that a bucket is never read as a window.

local window_limit = limit

local function limit(log, meta, span)
  if string.byte(span, 1) == 114 then -- 'r': bucket.lua's SPAN
    error('ERR tollgate: a token bucket sent to a script without the buckets\' code', 0)
  end
  return window_limit(log, meta, span)
end
