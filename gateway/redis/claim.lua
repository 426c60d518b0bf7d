-- claim: a fan whose place has been offered takes it and starts a session.
-- KEYS: dials, bucket, offers, active, claims
-- ARGV: identity, position
-- Returns {state, session_expiry_ms}: admitted (now, or already),
-- waiting (the place is not offered yet), lapsed (offered, not claimed in
-- time: the fan goes to the back), paused.
local now = now_ms()
local session_ms = dial(KEYS[1], 'session_seconds', 600) * 1000
local have = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[1]))
if have and have > now then return {'admitted', have} end
if dial(KEYS[1], 'paused', 0) == 1 then return {'paused', 0} end
local pos = tonumber(ARGV[2])
local serving = tonumber(redis.call('HGET', KEYS[2], 'serving') or 0)
if pos > serving then return {'waiting', 0} end
local offer = tonumber(redis.call('ZSCORE', KEYS[3], pos))
if not offer or offer <= now then
  redis.call('ZREM', KEYS[3], pos)
  return {'lapsed', 0}
end
redis.call('ZREM', KEYS[3], pos)
local exp = now + session_ms
redis.call('ZADD', KEYS[4], exp, ARGV[1])
redis.call('ZADD', KEYS[5], now, pos)
return {'admitted', exp}
