-- cancel.lua: remove the entries a reservation wrote and give their units
-- back.
--
-- Needs: nothing.
--
-- The log stays sorted (removing an entry never reorders the others).
-- The meta's head may now be older than the log's, which only brings
-- trimming and the fast path's end earlier; a sum that reaches zero is
-- dropped with its meta, for reserve.lua to rebuild from what is left.
--
-- KEYS: log_1, meta_1, sum_1, ..., log_n, meta_n, sum_n
-- ARGV: entry_1, ..., entry_n  (as written: "<µs>:<units>:<id>")
-- Reply: the number of entries removed.

local removed = 0
for i = 1, #ARGV do
  local log, meta, sum = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  if redis.call('LREM', log, -1, ARGV[i]) > 0 then
    removed = removed + 1
    local units = tonumber(string.match(ARGV[i], '^%d+:(%d+):'))
    if redis.call('EXISTS', sum) == 1 and redis.call('DECRBY', sum, units) <= 0 then
      redis.call('DEL', meta, sum)
    end
  end
end
return removed
