-- Shared by every script: the server's clock in milliseconds, the dials,
-- and the one-time freeze of the pre-queue at onsale. Concatenated in front
-- of each script by store.go; every key arrives through KEYS.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function dial(k, name, default)
  local v = redis.call('HGET', k, name)
  if v == false then return default end
  return tonumber(v) or v
end

-- freeze fixes the pre-queue at onsale, exactly once: its size becomes the
-- offset of every later (FIFO) arrival, and its members' ranks their places.
local function freeze(k_pre, k_frozen)
  local f = redis.call('GET', k_frozen)
  if f then return tonumber(f) end
  local n = redis.call('ZCARD', k_pre)
  redis.call('SET', k_frozen, n)
  return n
end
