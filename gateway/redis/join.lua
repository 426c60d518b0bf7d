-- join: a place in line for an identity, idempotent.
-- KEYS: dials, pre, ids, frozen, seq
-- ARGV: identity, random score (crypto/rand, from the gateway)
-- Returns {state, position, at}: state is pre (position unknown until
-- onsale), pos, not_open (at = prequeue_at), closed, ended (this identity
-- had its session), or no_event.
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no_event', 0, 0} end
local prequeue_at = dial(KEYS[1], 'prequeue_at', 0)
local onsale_at = dial(KEYS[1], 'onsale_at', 0)
local closes_at = dial(KEYS[1], 'closes_at', 0)

local frozen = redis.call('EXISTS', KEYS[4]) == 1
local have = redis.call('HGET', KEYS[3], ARGV[1])
if have then
  if have == 'done' then return {'ended', 0, 0} end
  if have ~= 'pre' then return {'pos', tonumber(have), 0} end
  if now < onsale_at and not frozen then return {'pre', 0, onsale_at} end
  freeze(KEYS[2], KEYS[4])
  return {'pos', redis.call('ZRANK', KEYS[2], ARGV[1]) + 1, 0}
end
if closes_at > 0 and now >= closes_at then return {'closed', 0, closes_at} end
if now < prequeue_at then return {'not_open', 0, prequeue_at} end
-- Once frozen, the pre-queue never changes again, whatever the clock or
-- the dials say: its ranks are places already handed out.
if now < onsale_at and not frozen then
  local score = ARGV[2]
  if dial(KEYS[1], 'queueing', 'random') == 'fifo' then score = now end
  redis.call('ZADD', KEYS[2], score, ARGV[1])
  redis.call('HSET', KEYS[3], ARGV[1], 'pre')
  return {'pre', 0, onsale_at}
end
local pos = freeze(KEYS[2], KEYS[4]) + redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[3], ARGV[1], pos)
return {'pos', pos, 0}
