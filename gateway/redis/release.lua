-- release: a stopping gateway gives up its tick lease of an event (the
-- stored tick, admission_bucket.lua, which ends with its ticker's name), so
-- another gateway takes the event over at its next tick rather than once
-- the lease lapses; a lease another gateway holds is left alone.
-- KEYS: tick
-- ARGV: holder
-- Returns 1 when the lease was given up, else 0.
local last = redis.call('GET', KEYS[1])
if last and string.match(last, ',([^,]*)$') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
