-- background.lua: decide a background call. A background call never takes
-- a hold: were it to reserve a later instant, an interactive call arriving
-- after it could not be admitted before it. It waits instead in the
-- scope's background room, in arrival order, and only the first in the
-- room is admitted, now, when every limit (a share of the interactive
-- ones, as the caller sends them) has room now and no interactive hold
-- waits; the others wait for their turn. The next in the room is told by
-- a message on the room's channel when the first leaves it.
--
-- Needs: clock.lua, log.lua, decide.lua, room.lua.
--
-- KEYS: decide.lua's, then the room: queue, alive, counter
-- ARGV: clock, wait (µs a place in the room lasts unless looked at again;
--       '0' to decide once without entering it; 'leave' to leave it),
--       id (of the entries, and of the waiter), then decide.lua's
-- Reply: {admitted (1 or 0), now, at, remaining, by, place, room_1, ...,
--   room_n} (reserve.lua's, with the place in the room)
--   at: when admitted, now; when not, the instant the call would fit were
--   it first in the room (a hint: interactive calls may take that room).
--   place: from 0 in the room; -1 when it did not enter.

local now = clock(ARGV[1])
local id = ARGV[3]
local n = (#ARGV - 3) / 3
local rk = #KEYS - 2 -- the room's keys follow the logs
local nread = rk - 1 - n
local waiting = room(KEYS[rk], KEYS[rk + 1], KEYS[rk + 2])
local channel = KEYS[rk]

-- Leave the room, and tell the next when it was first.
local function leave()
  local was = waiting:rank(id)
  if waiting:leave(id) and was == 0 then
    local next = waiting:head(1)[1]
    if next then redis.call('PUBLISH', channel, next) end
  end
end

if ARGV[2] == 'leave' then
  leave()
  return {0}
end
local wait = tonumber(ARGV[2])

local read = redis.call('MGET', unpack(KEYS, 1, nread))
local limits = windows(n, nread)
local t0, by = prepare(limits, read, nread, now)
if not t0 then return by end
local at, beyond, remaining
at, beyond, by, remaining = place(limits, t0, by)

waiting:reap(now)
local spot = waiting:rank(id)
local first = spot == 0 or (not spot and waiting:size() == 0)
if first and not beyond and at == now then
  remaining = admit(limits, now, now)
  leave()
  return {1, now, now, remaining, 0, 0, unpack(rooms(limits))}
end
keep(limits, now)
if wait == 0 then
  return {0, now, at, remaining, by, -1, unpack(rooms(limits))}
end
waiting:enter(id, now, wait, 'background')
return {0, now, at, remaining, by, waiting:rank(id), unpack(rooms(limits))}
