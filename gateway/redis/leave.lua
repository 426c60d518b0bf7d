-- leave: a fan says they are done. A live session ends now, so its room
-- goes to the next fan in line at the next tick; a fan still in line gives
-- the place up (before the draw it leaves the pre-queue; a numbered place
-- stays, and its offer lapses unclaimed like a no-show's). Either way the
-- identity may not queue again for this event. Safe to retry.
-- KEYS: active, ids, pre, frozen
-- ARGV: identity
-- Returns 'ended' (a live session ended), 'left' (a place in line given
-- up) or 'none' (nothing to leave: unknown, or already over).
local now = now_ms()
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return 'none' end
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if exp then
  redis.call('ZREM', KEYS[1], ARGV[1])
  if exp > now then return 'ended' end
  return 'none'
end
if cur == 'done' then return 'none' end
if cur == 'pre' then prequeue_leave(KEYS[3], KEYS[4], ARGV[1]) end
redis.call('HSET', KEYS[2], ARGV[1], 'done')
return 'left'
