-- core health: the share of the rate dial the core's health allows, one
-- factor shared by every gateway in front of the same core. The rule and
-- its reasoning are in gateway/health/rule.go; this script only tallies
-- the gateways' verdicts and applies each window's once, atomically.
--
-- Windows are numbered on the Redis server's clock (now / window_ms), so
-- every gateway's window k is the same second.
-- * A verdict on window k counts only while k is the window just closed
--   (k = cur - 1): each gateway sends it as soon as it sees k close, one
--   tick into k + 1 (gateway/health, Monitor.Factor). Anything else (a
--   late report from a stalled gateway, a window not yet closed) is only
--   read.
-- * The verdicts on k are tallied (good, bad) until k + 1 ends; the first
--   exchange in k + 2 or later settles the window, once:
--     bad >= good (and some bad): factor = max(floor, factor * decrease);
--     good > bad: factor = min(1, factor + increase);
--   so one gateway that judges its windows bad (its own path to the core
--   broken) cannot hold the fleet at the floor while the others see the
--   core well, and however many gateways saw a bad window it decreases
--   once.
-- * none: the factor is only read (and a closed tally settled).
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

local h = redis.call('HMGET', KEYS[1], 'factor', 'reason', 'last_dec', 'last_inc', 'decreases', 'increases',
  'tally_w', 'tally_good', 'tally_bad', 'tally_reason')
local factor = tonumber(h[1])
local reason = h[2] or ''
local last_dec, last_inc = tonumber(h[3]) or 0, tonumber(h[4]) or 0
local decs, incs = tonumber(h[5]) or 0, tonumber(h[6]) or 0
local tw, good, bad, treason = tonumber(h[7]) or 0, tonumber(h[8]) or 0, tonumber(h[9]) or 0, h[10] or ''
if factor == nil then
  factor = tonumber(ARGV[8]) or 1
end
factor = math.min(1, math.max(floor, factor))

local changed = h[1] == false
if tw > 0 and cur >= tw + 2 then
  -- Window tw can get no more verdicts: settle it.
  if bad > 0 and bad >= good and tw > last_dec then
    factor = math.max(floor, factor * decrease)
    last_dec, reason, decs = tw, treason, decs + 1
  elseif good > bad and tw > last_inc and tw > last_dec and factor < 1 then
    factor = math.min(1, factor + increase)
    last_inc, incs = tw, incs + 1
  end
  tw, good, bad, treason, changed = 0, 0, 0, '', true
end
if (verdict == 'bad' or verdict == 'good') and k == cur - 1 and k > 0 then
  -- (tw is now 0 or cur - 1: an older tally was settled above.)
  tw, changed = k, true
  if verdict == 'bad' then
    bad, treason = bad + 1, ARGV[4]
  else
    good = good + 1
  end
end
-- Millionths are plenty and keep the stored number short.
factor = math.floor(factor * 1e6 + 0.5) / 1e6
if changed then
  redis.call('HSET', KEYS[1], 'factor', tostring(factor), 'reason', reason, 'last_dec', last_dec,
    'last_inc', last_inc, 'decreases', decs, 'increases', incs, 'tally_w', tw, 'tally_good', good,
    'tally_bad', bad, 'tally_reason', treason, 'updated', now)
end
return {tostring(factor), reason, now, cur, last_dec, last_inc, decs, incs}
