-- slots.lua: a cap on calls in flight at once, shared by every process: n
-- slots per scope bucket, each held until its call ends or, should its
-- process die, until it expires.
--
-- Needs: clock.lua, room.lua.
--
-- KEYS: holders (a sorted set of slot ids by the instant, µs, each expires
--       unless renewed), queue, alive, counter (the waiting room)
-- ARGV: clock, op, n, ttl (µs a slot or a wait lasts unless renewed),
--       then by op:
--   take    id, wait ('1' to wait in the room for a turn, '0' not to),
--           class ('interactive' or 'background')
--           reply {1} when the slot is id's; {0, place} when it is not:
--           place from 0 in the room, or -1 when it did not enter
--   release id: free id's slot, or take id out of the room, and hand
--           the free slots to the first waiters (a slot freed by a plain
--           ZREM, Slot.Release's, included)
--           reply the number of slots handed to waiters
--   renew   ids...: push back the expiry of the slots still held
--           reply the number still held
--
-- A freed slot goes straight to the first waiter in the room: the script
-- makes it the holder and publishes its id on the holders key's channel,
-- for its process to wake it. A waiter that misses the message finds its
-- slot when it next looks.

local now = clock(ARGV[1])
local op, n, ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local holders = KEYS[1]
local waiting = room(KEYS[2], KEYS[3], KEYS[4])

local function expire()
  redis.call('PEXPIRE', holders, math.floor(ttl / 1000) + 1000)
end

-- Give free slots to the first waiters, in order.
local function handoff()
  local free = n - redis.call('ZCARD', holders)
  local given = 0
  for _, id in ipairs(waiting:head(free)) do
    waiting:leave(id)
    redis.call('ZADD', holders, string.format('%d', now + ttl), id)
    redis.call('PUBLISH', holders, id)
    given = given + 1
  end
  if given > 0 then expire() end
  return given
end

-- Drop the slots and the waits that expired.
local function reap()
  waiting:reap(now)
  if redis.call('ZREMRANGEBYSCORE', holders, '-inf', string.format('%d', now)) > 0 then
    handoff()
  end
end

if op == 'renew' then
  local held = 0
  for i = 5, #ARGV do
    if redis.call('ZADD', holders, 'XX', 'CH', string.format('%d', now + ttl), ARGV[i]) == 1 then
      held = held + 1
    end
  end
  if held > 0 then expire() end
  return held
end

local id = ARGV[5]
if op == 'release' then
  redis.call('ZREM', holders, id)
  waiting:leave(id)
  reap()
  return handoff()
end

-- take
reap()
if redis.call('ZSCORE', holders, id) then
  return {1} -- handed over while it waited
end
local free = n - redis.call('ZCARD', holders)
local place = waiting:rank(id)
if free > 0 and ((not place and waiting:size() == 0) or (place and place < free)) then
  waiting:leave(id)
  redis.call('ZADD', holders, string.format('%d', now + ttl), id)
  expire()
  return {1}
end
if ARGV[6] ~= '1' then
  return {0, -1}
end
waiting:enter(id, now, ttl, ARGV[7])
return {0, waiting:rank(id)}
