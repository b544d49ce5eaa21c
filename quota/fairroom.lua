-- fairroom.lua: the waiting room of a bucket with shares, for the calls
-- that may not take a hold: those of a tenant at or above its share (a
-- borrower), and background calls. A hold is dated in the log, and a log
-- is kept in time order, so a call arriving later can never be dated
-- before it: were a borrower to hold, a tenant below its share arriving
-- after it would wait behind it. A borrower waits in the room instead, in
-- arrival order (a background call after every interactive one), and only
-- the first in the room is admitted, now, when its call fits now and no
-- hold waits. So every call of a tenant below its share goes first (its
-- hold, or its admission, is never behind a borrower's), and borrowers go
-- first come first served among themselves.
--
-- Provides: fair_room(queue, alive, counter, who), and on it
-- :reap(now), :enter(member, now, ttl, class), :leave(member),
-- :waits(tenant), and room.lua's :rank(), :size(), :head().
-- Needs: room.lua.
--
-- A waiter is named "<id>:<class><tenant>" (class i interactive, b
-- background; ids hold no colon), so that the room knows whose it drops.
-- Keys: room.lua's three, and who, a sorted set of tenants by how many of
-- their interactive calls wait, so that a tenant whose earlier call waits
-- in the room sends its later ones there too: within a tenant (and a
-- class), first come first served. Only commands the README's access
-- list grants are used.

local FairRoom = setmetatable({}, {__index = Room})
FairRoom.__index = FairRoom

local function fair_room(queue, alive, counter, who)
  local r = room(queue, alive, counter)
  r.who = who
  return setmetatable(r, FairRoom)
end

-- Add delta to the interactive waiters of member's tenant.
function FairRoom:count(member, delta)
  local class, tenant = string.match(member, '^[^:]*:([ib])(.*)$')
  if class ~= 'i' then return end
  local k = tonumber(redis.call('ZSCORE', self.who, tenant) or 0) + delta
  if k > 0 then
    redis.call('ZADD', self.who, string.format('%d', k), tenant)
  else
    redis.call('ZREM', self.who, tenant)
  end
end

function FairRoom:reap(now)
  local gone = Room.reap(self, now)
  for _, member in ipairs(gone) do self:count(member, -1) end
  return gone
end

function FairRoom:enter(member, now, ttl, class)
  if not redis.call('ZSCORE', self.queue, member) then self:count(member, 1) end
  Room.enter(self, member, now, ttl, class)
  redis.call('PEXPIRE', self.who, math.floor(ttl / 1000) + 1000)
end

-- Take member out of the room, and tell the next waiter when it was first.
function FairRoom:leave(member)
  local was = self:rank(member)
  if not Room.leave(self, member) then return end
  self:count(member, -1)
  if was == 0 then
    local next = self:head(1)[1]
    if next then redis.call('PUBLISH', self.queue, next) end
  end
end

-- Whether an interactive call of tenant waits in the room.
function FairRoom:waits(tenant)
  return redis.call('ZSCORE', self.who, tenant) ~= false
end
