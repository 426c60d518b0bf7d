-- Shared by every script: the server's clock in milliseconds and the
-- dials. Concatenated, with prequeue.lua, in front of each script by
-- store.go; every key arrives through KEYS.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- keep makes keys a script just wrote expire with the room: at the dials'
-- expiry (the sale window's end, gateway.Dials.ExpiresAt, which the
-- gateway's room sets on every key: Store.Expire); a room with no end
-- keeps them. Scripts call it where a write can make a key anew (a sorted
-- set a tick or a claim emptied, and the line's first numbered place): a
-- key made anew has no expiry, and Store.Expire reaches it only at the
-- room's next call (room.ExpireEvery).
local function keep(k_dials, ...)
  local at = redis.call('PEXPIRETIME', k_dials)
  if at > 0 then
    for _, k in ipairs({...}) do redis.call('PEXPIREAT', k, at) end
  end
end

local function dial(k, name, default)
  local v = redis.call('HGET', k, name)
  if v == false then return default end
  return tonumber(v) or v
end
