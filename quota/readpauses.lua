-- readpauses.lua: a general decision's read of the pauses, each charge's
-- bucket's and the scope's, named after the metas, into read after the
-- metas, in one MGET. It runs only where the common case did not hold
-- (after fast.lua's), so a plain decision never reaches it.
--
-- Provides: names (the pauses' keys, by their place in read), nread (the
-- metas and pauses read).
-- Needs: n (the windows) and read (their metas, a table); KEYS beginning
-- with the metas, and ARGV[3], which says where each charge's windows
-- start when there are several charges (reserve.lua's).

local names, firsts = {}, {'1'}
if ARGV[3] ~= '' then
  firsts = {}
  for f in string.gmatch(ARGV[3], '%d+') do firsts[#firsts + 1] = f end
end
for j, f in ipairs(firsts) do
  -- (':[^:]+$', not ':meta$': a token bucket's state ends ':tat'; bucket.lua)
  names[n + j] = string.match(KEYS[tonumber(f)], '^(.*:)[^:]+:[^:]+$') .. 'pause'
end
local nread = n + #firsts + 1
names[nread] = string.match(KEYS[1], '^[^{]*{[^}]*}:') .. 'pause'
local paused = redis.call('MGET', unpack(names, n + 1, nread))
for i = n + 1, nread do read[i] = paused[i - n] end
