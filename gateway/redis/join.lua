-- join: a place in line for an identity, idempotent. Before onsale the
-- fan enters the pre-queue draw (prequeue.lua); after it, the fan gets the
-- next place at the back. One identity, one place: tabs, devices and
-- refreshes find the place they have; after its session, none.
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

local open = prequeue_open(KEYS[4], now, onsale_at)
local have = redis.call('HGET', KEYS[3], ARGV[1])
if have then
  if have == 'done' then return {'ended', 0, 0} end
  if have ~= 'pre' then return {'pos', tonumber(have), 0} end
  if open then return {'pre', 0, onsale_at} end
  freeze(KEYS[2], KEYS[4])
  return {'pos', drawn_place(KEYS[2], ARGV[1]), 0}
end
if closes_at > 0 and now >= closes_at then return {'closed', 0, closes_at} end
if now < prequeue_at then return {'not_open', 0, prequeue_at} end
if open then
  prequeue_enter(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now)
  return {'pre', 0, onsale_at}
end
local drawn = freeze(KEYS[2], KEYS[4])
local n = redis.call('INCR', KEYS[5])
local pos = drawn + n
redis.call('HSET', KEYS[3], ARGV[1], pos)
if n == 1 then keep(KEYS[1], KEYS[3], KEYS[4], KEYS[5]) end -- the line's first place: seq and frozen made
return {'pos', pos, 0}
