-- free.lua: frees a slot of a cap, as Slot's free does with two plain
-- commands in a round trip of their own, for a limiter whose callers
-- share pipelines: a script rides in a shared pipeline where two plain
-- commands would take a round trip of their own, which costs Redis more
-- than the script does.
--
-- KEYS: the holders, the waiting queue (slots.lua's KEYS[1] and KEYS[2])
-- ARGV: the slot's id
-- Reply: how many callers wait for a slot: slots.lua's release must hand
--        the free one to the first when any do.

redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('ZCARD', KEYS[2])
