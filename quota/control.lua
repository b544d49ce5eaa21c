-- control.lua: the kill switch. Pause a bucket, or a whole scope, for a
-- reason, or lift pauses, and tell every process listening.
--
-- Needs: clock.lua, binary.lua, reach.lua. (It writes a pause as
-- log.lua's pause_end() reads it,
-- the instant in µs as a decimal integer, and as pause.lua does: a longer
-- pause already set stays.)
--
-- KEYS: pause: the pause key, its reason key, its upstream key
--       resume: pause, reason and upstream keys, in threes, of every pause
--       to lift
-- ARGV: clock, op ('pause' or 'resume'), channel, notice id, scope and
--       bucket as keys name them (bucket '' for the whole scope), then for
--       a pause: duration µs, reason ('' for none), '1' when set for an
--       upstream's answer ('' for an operator's)
-- Reply: pause: {until µs, the reason of the pause in force, now, 1 when
--        it was set for an upstream's answer, else 0}
--        resume: the number of pauses lifted
--
-- A reason key holds "<until µs>:<text>": it belongs to the pause that
-- ends at until, and to no later one; an upstream key holds "<until µs>"
-- when the pause ending at until was set for an upstream's answer. The
-- notice published on the
-- channel is "<op> <id> <µs the pause has left> <scope> <bucket>".

local now = clock(ARGV[1])
local op, channel, id, scope, bucket = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local function tell(left)
  redis.call('PUBLISH', channel, op .. ' ' .. id .. ' ' .. string.format('%d', left) .. ' ' .. scope .. ' ' .. bucket)
end

if op == 'resume' then
  local lifted = 0
  for i = 1, #KEYS, 3 do
    lifted = lifted + redis.call('DEL', KEYS[i])
    redis.call('DEL', KEYS[i + 1], KEYS[i + 2])
  end
  tell(0)
  return lifted
end

local resume = now + tonumber(ARGV[7])
local reason = ARGV[8]
local v = redis.call('GET', KEYS[1])
local old = v and string.match(v, '^%d+$')
if v and not old then
  error('FORMAT tollgate: ' .. KEYS[1] .. ' holds a pause of a Redis format this tollgate cannot read', 0)
end
old = tonumber(old)
if old and old >= resume then
  local why, text = redis.call('GET', KEYS[2]), ''
  if why then
    local u, t = string.match(why, '^(%d+):(.*)$')
    if u and tonumber(u) == old then text = t end
  end
  local up = redis.call('GET', KEYS[3])
  reach(KEYS[1], old, now)
  tell(old - now)
  return {old, text, now, (up and tonumber(up) == old) and 1 or 0}
end
local ms = math.floor((resume - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%d', resume), 'PX', ms)
if reason ~= '' then
  redis.call('SET', KEYS[2], string.format('%d', resume) .. ':' .. reason, 'PX', ms)
else
  redis.call('DEL', KEYS[2])
end
if ARGV[9] == '1' then
  redis.call('SET', KEYS[3], string.format('%d', resume), 'PX', ms)
else
  redis.call('DEL', KEYS[3])
end
reach(KEYS[1], resume, now)
tell(resume - now)
return {resume, reason, now, ARGV[9] == '1' and 1 or 0}
