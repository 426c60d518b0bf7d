-- core health: the share of the rate dial the core's health allows, one
-- factor shared by every gateway in front of the same core. The rule and
-- its reasoning are in gateway/health/rule.go; this script only applies a
-- gateway's verdict atomically, so that the verdicts of several gateways on
-- the same window move the factor once.
--
-- Windows are numbered on the Redis server's clock (now / window_ms), so
-- every gateway's window k is the same second.
-- * bad verdict on window k: factor = max(floor, factor * decrease), once
--   per window: only if no decrease was made for window k or later.
-- * good verdict on window k: factor = min(1, factor + increase), once per
--   window, and only if no decrease was made for window k or later (a
--   window somebody called bad is not a good one).
-- * none, or a window neither the current one nor the one before it (a
--   late report from a stalled gateway): the factor is only read.
-- * A missing hash (the first gateway, or a Redis failover lost it) starts
--   at the reporting gateway's last factor (seed; 1 for a new gateway), so
--   losing the key does not let the line in at the dial mid-outage.
-- KEYS: the health hash
-- ARGV: verdict (good|bad|none), window, window_ms, reason, decrease,
--       increase, floor, seed
-- Returns {factor (string), reason, now_ms, window, last_decrease,
--          last_increase, decreases, increases}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local verdict, k, w = ARGV[1], tonumber(ARGV[2]) or 0, tonumber(ARGV[3]) or 1000
local decrease, increase = tonumber(ARGV[5]) or 0.5, tonumber(ARGV[6]) or 0.05
local floor = math.min(1, math.max(0, tonumber(ARGV[7]) or 0))
local cur = math.floor(now / w)

local h = redis.call('HMGET', KEYS[1], 'factor', 'reason', 'last_dec', 'last_inc', 'decreases', 'increases')
local factor = tonumber(h[1])
local reason = h[2] or ''
local last_dec, last_inc = tonumber(h[3]) or 0, tonumber(h[4]) or 0
local decs, incs = tonumber(h[5]) or 0, tonumber(h[6]) or 0
if factor == nil then
  factor = tonumber(ARGV[8]) or 1
end
factor = math.min(1, math.max(floor, factor))

local changed = h[1] == false
if k >= cur - 1 and k <= cur then
  if verdict == 'bad' and k > last_dec then
    factor = math.max(floor, factor * decrease)
    last_dec, reason, decs, changed = k, ARGV[4], decs + 1, true
  elseif verdict == 'good' and k > last_inc and k > last_dec and factor < 1 then
    factor = math.min(1, factor + increase)
    last_inc, incs, changed = k, incs + 1, true
  end
end
-- Millionths are plenty and keep the stored number short.
factor = math.floor(factor * 1e6 + 0.5) / 1e6
if changed then
  redis.call('HSET', KEYS[1], 'factor', tostring(factor), 'reason', reason, 'last_dec', last_dec,
    'last_inc', last_inc, 'decreases', decs, 'increases', incs, 'updated', now)
end
return {tostring(factor), reason, now, cur, last_dec, last_inc, decs, incs}
