-- requeue: an identity whose turn lapsed unclaimed goes to the back.
-- KEYS: dials, pre, ids, frozen, seq    ARGV: identity
local pos = freeze(KEYS[2], KEYS[4]) + redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[3], ARGV[1], pos)
return pos
