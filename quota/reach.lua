-- reach.lua: a pause written into the metas of the windows it stops, so
-- that fast.lua, which reads no pause key, refuses to decide on them.
--
-- Provides: reach(key, resume, now).
-- Needs: binary.lua.
--
-- The metas of a scope's windows are listed in its key "windows" (a sorted
-- set of meta keys by the instant they expire; log.lua's save() lists each
-- meta it gives an expiry). reach() writes resume into the pause field of
-- every meta of this format listed there that the pause key stops (all of
-- the scope's for the scope's pause, the bucket's for a bucket's) and
-- holds an earlier instant. A meta written later reads the pause keys
-- itself (save()), and a meta of an earlier format goes to the general
-- decision, which reads them too.

local function reach(key, resume, now)
  local scope = string.match(key, '^[^{]*{[^}]*}:')
  if not scope or string.sub(key, -5) ~= 'pause' then return end
  local within = string.sub(key, 1, -6) -- "<prefix>{S}:" or "<prefix>{S}:B:"
  local reg = scope .. 'windows'
  redis.call('ZREMRANGEBYSCORE', reg, '-inf', '(' .. string.format('%d', now))
  for _, meta in ipairs(redis.call('ZRANGE', reg, 0, -1)) do
    if string.sub(meta, 1, #within) == within then
      local m = redis.call('GET', meta)
      if m and #m >= HEAD and string.sub(m, 1, 3) == '#3:' and sunpack('>i8', m, PZ) < resume then
        redis.call('SET', meta, string.sub(m, 1, PZ - 1) .. spack('>i8', resume) .. string.sub(m, PZ + 8), 'KEEPTTL')
      end
    end
  end
end
