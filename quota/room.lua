-- room.lua: a waiting room, for callers that wait their turn in arrival
-- order across processes for something a decision cannot date in advance
-- (a slot another call will free).
--
-- Provides: room(queue, alive, counter), and on it :reap(now),
-- :enter(id, now, ttl, class), :leave(id), :rank(id), :size(), :head(n).
-- Needs: nothing.
--
-- A room is three keys: queue, a sorted set of waiter ids by ticket
-- (arrival order; a background waiter's ticket is offset so that every
-- interactive waiter ranks before it); alive, a sorted set of the same ids
-- by the instant (µs) their wait expires unless they renew it, so that a
-- waiter whose process died leaves the room; and counter, the last ticket
-- drawn. Waiters renew their place each time they look at the room.

-- A background ticket comes after every interactive one: tickets are far
-- below 2^52, and Lua numbers are exact to 2^53.
local BACKGROUND = 4503599627370496 -- 2^52

local Room = {}
Room.__index = Room

local function room(queue, alive, counter)
  return setmetatable({queue = queue, alive = alive, counter = counter}, Room)
end

-- Drop the waiters whose wait expired at or before now; returns their ids.
function Room:reap(now)
  local gone = redis.call('ZRANGEBYSCORE', self.alive, '-inf', string.format('%d', now))
  if #gone > 0 then
    redis.call('ZREM', self.queue, unpack(gone))
    redis.call('ZREMRANGEBYSCORE', self.alive, '-inf', string.format('%d', now))
  end
  return gone
end

-- Put id in the room (keeping its place if it is there) until now + ttl.
function Room:enter(id, now, ttl, class)
  if not redis.call('ZSCORE', self.queue, id) then
    local ticket = redis.call('INCR', self.counter)
    if class == 'background' then ticket = ticket + BACKGROUND end
    redis.call('ZADD', self.queue, string.format('%d', ticket), id)
  end
  redis.call('ZADD', self.alive, string.format('%d', now + ttl), id)
  local ms = math.floor(ttl / 1000) + 1000
  redis.call('PEXPIRE', self.queue, ms)
  redis.call('PEXPIRE', self.alive, ms)
  redis.call('PEXPIRE', self.counter, ms)
end

-- Take id out of the room; false when it was not there.
function Room:leave(id)
  redis.call('ZREM', self.alive, id)
  return redis.call('ZREM', self.queue, id) == 1
end

-- The place of id in the room, from 0, or nil.
function Room:rank(id)
  return redis.call('ZRANK', self.queue, id)
end

function Room:size()
  return redis.call('ZCARD', self.queue)
end

-- The first n waiters, in order.
function Room:head(n)
  if n <= 0 then return {} end
  return redis.call('ZRANGE', self.queue, 0, n - 1)
end
