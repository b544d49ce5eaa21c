-- settle.lua: replace an admitted reservation's units in one bucket with
-- what the call truly cost, at the entry's own instant: the call then
-- counts its true cost in each window for exactly one window from when it
-- was admitted, never longer. A refund leaves the window exactly when the
-- units it returns would have; an extra charge counts even when it takes
-- the window over its limit (the upstream spent it): later callers wait
-- it out. An entry that has left its log (trimmed, or its window gone)
-- has nothing left to settle.
--
-- Needs: nothing.
--
-- KEYS: log_1, meta_1, sum_1, ..., log_n, meta_n, sum_n (one bucket's windows)
-- ARGV: the entry as written ("<µs>:<units>:<id>"), the entry to write
--       ("<µs>:<true units>:<id>"), the difference (true less written)
-- Reply: the number of windows settled.

local old, new, delta = ARGV[1], ARGV[2], tonumber(ARGV[3])
local settled = 0
for i = 1, #KEYS / 3 do
  local log, meta, sum = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  -- The entry is near the tail: few calls are admitted between a call's
  -- admission and its response.
  local at = redis.call('LPOS', log, old, 'RANK', -1)
  if at then
    redis.call('LSET', log, at, new)
    settled = settled + 1
    if redis.call('EXISTS', sum) == 1 then
      if redis.call('INCRBY', sum, delta) <= 0 then
        redis.call('DEL', meta, sum) -- rebuilt from the log when next read
      end
    end
  end
end
return settled
