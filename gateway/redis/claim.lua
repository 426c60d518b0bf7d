-- claim: a fan whose place has been offered takes it and starts a session;
-- a fan whose offer lapsed goes to the back, in the same script, so a
-- replayed or concurrent claim with an old place can never make a second
-- place. One session per identity: once claimed, the identity's ids entry
-- is 'done' and it cannot queue again for the event. Safe to retry.
-- KEYS: dials, bucket, offers, active, claims, ids, pre, frozen, seq
-- ARGV: identity, position
-- Returns {state, n}: admitted (n = session end, ms), waiting, paused,
-- moved (n = the fan's current place: the token is stale), requeued (n =
-- the new place), ended (the fan's session is over), unknown.
local now = now_ms()
local session_ms = dial(KEYS[1], 'session_seconds', 600) * 1000
local have = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[1]))
if have and have > now then return {'admitted', have} end
local cur = redis.call('HGET', KEYS[6], ARGV[1])
if not cur then return {'unknown', 0} end
if cur == 'done' then return {'ended', 0} end
local place
if cur == 'pre' then
  if redis.call('EXISTS', KEYS[8]) == 0 then return {'waiting', 0} end
  place = drawn_place(KEYS[7], ARGV[1])
else
  place = tonumber(cur)
end
if place ~= tonumber(ARGV[2]) then return {'moved', place} end
if dial(KEYS[1], 'paused', 0) == 1 then return {'paused', 0} end
local serving = tonumber(redis.call('HGET', KEYS[2], 'serving') or 0)
if place > serving then return {'waiting', 0} end
local offer = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[2]))
redis.call('ZREM', KEYS[3], ARGV[2])
if not offer or offer <= now then
  local pos = freeze(KEYS[7], KEYS[8]) + redis.call('INCR', KEYS[9])
  redis.call('HSET', KEYS[6], ARGV[1], pos)
  return {'requeued', pos}
end
local exp = now + session_ms
redis.call('ZADD', KEYS[4], exp, ARGV[1])
redis.call('ZADD', KEYS[5], now, ARGV[2])
-- One session per identity: once it ends, the identity does not queue again.
redis.call('HSET', KEYS[6], ARGV[1], 'done')
return {'admitted', exp}
