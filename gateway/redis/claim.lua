-- claim: a fan whose place has been offered takes it and starts a session;
-- a fan whose offer lapsed goes to the back, in the same script, so a
-- replayed or concurrent claim with an old place can never make a second
-- place. One session per identity: once claimed, the identity's ids entry
-- is 'done' and it cannot queue again for the event. Safe to retry.
-- KEYS: dials, bucket, offers, active, claims, ids, pre, frozen, seq
-- ARGV: identity, position
-- Returns {state, n}: admitted (n = session end, ms), waiting, paused,
-- moved (n = the fan's current place: the token is stale, or, when n is
-- smaller than the token's place, the store lost the fan's move to the
-- back), requeued (n = the new place), ended (the fan's session is over),
-- unknown (the store lost the fan's join, or never had it: restore.lua).
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
  -- Two identities at one place (restore.lua, rule 2): after a failover
  -- lost a join, a new joiner was given the same place and the token put
  -- the first fan back at it. The first claim took the offer; the second
  -- counts as offered while that claim is within claim_seconds, instead
  -- of going to the back. (Otherwise one identity holds a place: a claim
  -- of it is this fan's own, which ended in 'done' above.)
  local claimed = tonumber(redis.call('ZSCORE', KEYS[5], ARGV[2]))
  local claim_ms = dial(KEYS[1], 'claim_seconds', 120) * 1000
  if not (claimed and claimed > now - claim_ms) then
    local drawn = freeze(KEYS[7], KEYS[8])
    local n = redis.call('INCR', KEYS[9])
    local pos = drawn + n
    redis.call('HSET', KEYS[6], ARGV[1], pos)
    if n == 1 then keep(KEYS[1], KEYS[8], KEYS[9]) end -- seq (and frozen) made
    return {'requeued', pos}
  end
end
local exp = now + session_ms
redis.call('ZADD', KEYS[4], exp, ARGV[1])
-- NX: a second fan admitted at a shared place (rule 2) keeps the first
-- claim's time, so the place's window is claim_seconds from its first
-- claim, never extended for a third.
redis.call('ZADD', KEYS[5], 'NX', now, ARGV[2])
-- One session per identity: once it ends, the identity does not queue again.
redis.call('HSET', KEYS[6], ARGV[1], 'done')
keep(KEYS[1], KEYS[4], KEYS[5])
return {'admitted', exp}
