-- cancel.lua: remove the entries a reservation wrote and give their units
-- back. The log stays sorted (removing an entry never reorders the others);
-- the meta is updated, or dropped when the log no longer agrees with it, in
-- which case reserve.lua rebuilds it from the log.
--
-- KEYS: log_1, meta_1, ..., log_n, meta_n
-- ARGV: entry_1, ..., entry_n  (as written: "<µs>:<cost>:<id>")
-- Reply: the number of entries removed.

local function ts(e)
  return tonumber(string.match(e, '^(%d+):'))
end

local removed = 0
for i = 1, #ARGV do
  local log, meta = KEYS[2 * i - 1], KEYS[2 * i]
  if redis.call('LREM', log, -1, ARGV[i]) > 0 then
    removed = removed + 1
    local cost = tonumber(string.match(ARGV[i], '^%d+:(%d+):'))
    local m = redis.call('GET', meta)
    local sum = m and tonumber(string.match(m, '^(%d+):'))
    local head = redis.call('LINDEX', log, 0)
    if sum and head and sum - cost > 0 then
      local tail = redis.call('LINDEX', log, -1)
      redis.call('SET', meta, string.format('%d:%d:%d', sum - cost, ts(tail), ts(head)), 'KEEPTTL')
    else
      redis.call('DEL', meta)
    end
  end
end
return removed
