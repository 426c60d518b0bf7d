-- position: a pre-queue fan's drawn place (prequeue.lua) once onsale has
-- passed; asking freezes the draw if no script has yet.
-- KEYS: dials, pre, ids, frozen    ARGV: identity
-- Returns {state, position}: pre (not on sale yet), pos, unknown.
local now = now_ms()
if now < dial(KEYS[1], 'onsale_at', 0) then return {'pre', 0} end
freeze(KEYS[2], KEYS[4])
local have = redis.call('HGET', KEYS[3], ARGV[1])
if not have then return {'unknown', 0} end
if have ~= 'pre' then return {'pos', tonumber(have)} end
return {'pos', drawn_place(KEYS[2], ARGV[1])}
