-- admission bucket: the token bucket that lets the line in, run by the
-- tick of the gateway holding the event's tick lease (Store.Tick, about
-- ten times a second).
--
-- Rules.
-- * Rate: the tokens come from the time elapsed since the last tick by any
--   gateway (the Redis server's clock), so however many gateways tick,
--   together they offer places at new_users_per_minute (within 5%:
--   BenchmarkAdmissionRate in cmd/gateway measures it across processes)
--   times the factor the ticking gateway passes (ARGV[1]): the share of the
--   dial the core's health allows (gateway/health/rule.go). It is clamped to
--   [0, 1] here, so no gateway can ever let the line in faster than the
--   dial; a missing factor is the dial.
-- * No burst: at most one second's worth of tokens accumulates, so after a
--   pause or an idle spell the front is not let in at once.
-- * Cap: places are offered only up to total_active_users minus the live
--   sessions and the open offers.
-- * Offers are places, in order: the serving counter moves up by one per
--   token; every place up to it has been offered. An offer lapses after
--   claim_seconds (claim.lua sends its fan to the back), a session after
--   session_seconds.
-- * Pause: nothing is offered, and the clock of open offers stops, so
--   nobody at the front loses a turn for waiting out the operators.
-- * Before onsale (the pre-queue is open, prequeue.lua) nothing is offered,
--   and the tick's queue length is the pre-queue's size: the gateways
--   spread the pre-queue's return after onsale over a time that grows with
--   it (gateway/http: prequeuePoll). The first tick after onsale freezes
--   the draw.
-- * One ticker (the lease): the bucket is run by the gateway holding the
--   event's tick lease (ARGV[2]), or by one taking it once it lapsed; any
--   other gateway is answered the holder's last tick instead, so the
--   bucket's work is per event, whatever the number of gateways, and the
--   others read the tick with one GET (Store.LastTick) between their own.
--   The lease is the last tick itself (KEYS[9]: it ends with its ticker's
--   name), kept for ARGV[3] ms: so a GET that finds no last tick means the
--   lease is free (or the room is gone), and a tick without a holder
--   (ARGV[2] empty) leaves a lease anyone takes. The rate does not depend on who ticks (the tokens come from the
--   time since the bucket's last tick), and a gap while nobody ticks (a
--   holder died: the lease must lapse first) only delays: it adds at most
--   the one second of burst below, never more.
-- KEYS: dials, pre, frozen, seq, bucket, offers, active, claims, tick
-- ARGV: factor (0 to 1; absent: 1), holder (empty: tick, whoever holds the
--       lease: tests, and their control), lease (ms)
-- Returns the tick as 'serving,queue_length,active,offers,
--          claims_last_minute,dials_version (-1: no dials),now,
--          factor (millionths),effective rate (thousandths of a place a
--          minute),ticker' (store.go parseTick).
local holder = ARGV[2] or ''
local lease_ms = tonumber(ARGV[3]) or 1000
if holder ~= '' then
  local last = redis.call('GET', KEYS[9])
  local h = last and string.match(last, ',([^,]*)$')
  if h and h ~= '' and h ~= holder then
    return last
  end
end
local now = now_ms()
local factor = math.min(1, math.max(0, tonumber(ARGV[1]) or 1))
local npm = dial(KEYS[1], 'new_users_per_minute', 0)
local tau = dial(KEYS[1], 'total_active_users', 0)
local paused = dial(KEYS[1], 'paused', 0)
local onsale_at = dial(KEYS[1], 'onsale_at', 0)
local claim_ms = dial(KEYS[1], 'claim_seconds', 120) * 1000
local version = dial(KEYS[1], 'version', 0)
local rate = npm * factor -- places a minute: the dial, or less while the core is unwell
local reported = {math.floor(factor * 1e6 + 0.5), math.floor(rate * 1000 + 0.5)}

local function encode(serving, queue, active, offers, claims, ver)
  return string.format('%d,%d,%d,%d,%d,%d,%d,%d,%d,', serving, queue, active, offers, claims, ver, now,
    reported[1], reported[2]) .. holder
end

-- store keeps the tick for the other gateways, renewing the lease.
local function store(tick)
  redis.call('SET', KEYS[9], tick, 'PX', lease_ms)
  return tick
end

if paused == 1 then
  -- A pause stops the clock of open offers: nobody at the front loses a
  -- turn for waiting out the operators.
  local open = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now + claim_ms)
  for _, m in ipairs(open) do redis.call('ZADD', KEYS[6], now + claim_ms, m) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now)
-- Claims are kept five minutes (claims_last_minute), and as long as a
-- claim can still admit a second fan at its place (claim.lua, rule 2).
redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', now - math.max(300000, claim_ms))
local active = redis.call('ZCARD', KEYS[7])
local claims = redis.call('ZCOUNT', KEYS[8], now - 60000, '+inf')

local serving = tonumber(redis.call('HGET', KEYS[5], 'serving') or 0)
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- no dials: the event is gone (or Redis lost it); nobody holds its lease
  return encode(serving, 0, active, 0, claims, -1)
end
if prequeue_open(KEYS[3], now, onsale_at) then
  return store(encode(serving, redis.call('ZCARD', KEYS[2]), active, redis.call('ZCARD', KEYS[6]), claims, version))
end
local queue = freeze(KEYS[2], KEYS[3]) + tonumber(redis.call('GET', KEYS[4]) or 0)
local tokens = tonumber(redis.call('HGET', KEYS[5], 'tokens') or 0)
local last = tonumber(redis.call('HGET', KEYS[5], 'last') or now)
local offers = redis.call('ZCARD', KEYS[6])
if paused == 1 or rate <= 0 then
  tokens = 0
else
  -- At most one second's worth accumulates: no burst after a pause or an idle spell.
  local burst = math.max(1, rate / 60)
  tokens = math.min(burst, tokens + math.max(0, now - last) * rate / 60000)
  local k = math.floor(math.min(tokens, tau - active - offers, queue - serving))
  if k > 0 then
    for i = 1, k do
      redis.call('ZADD', KEYS[6], now + claim_ms, serving + i)
    end
    if offers == 0 then keep(KEYS[1], KEYS[6]) end -- the offers made anew
    serving = serving + k
    tokens = tokens - k
    offers = offers + k
  end
end
redis.call('HSET', KEYS[5], 'serving', serving, 'tokens', tokens, 'last', now)
return store(encode(serving, queue, active, offers, claims, version))
