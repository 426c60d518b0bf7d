-- Shared by every script: the server's clock in milliseconds and the
-- dials. Concatenated, with prequeue.lua, in front of each script by
-- store.go; every key arrives through KEYS.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function dial(k, name, default)
  local v = redis.call('HGET', k, name)
  if v == false then return default end
  return tonumber(v) or v
end
