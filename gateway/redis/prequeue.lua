-- The pre-queue draw: where a fan who comes early stands at onsale.
--
-- Rule. Between prequeue_at and onsale_at a joining fan gets no place yet:
-- it enters the pre-queue ({evt}:pre, a sorted set) with a score the
-- gateway draws from crypto/rand (53 bits, exact in a score; prequeue.go),
-- or its arrival time when the queueing dial is fifo, and its ids entry
-- says 'pre'. At onsale the first script to run for the event (any
-- gateway's join, position, claim or tick) freezes the pre-queue, exactly
-- once: {evt}:frozen records its size N, the members' ranks become places
-- 1..N, and every later arrival gets N + its arrival number ({evt}:seq).
--
-- Why. Everyone who came before onsale is equal: a random order gives a
-- bot or a fast network nothing for arriving first (TestShuffleUniform
-- checks the order is uniform, against a FIFO control). Freezing once, in
-- Redis, is what makes every gateway agree on the draw: once frozen the
-- pre-queue never changes, whatever the clock or the dials say, because
-- its ranks are places already handed out; so the operators' API refuses
-- to move onsale_at, prequeue_at or queueing after it (gateway.DialList,
-- Frozen). A fan who leaves before the draw is taken out of it; after the
-- draw its place stays, and its offer lapses like a no-show's.
--
-- Concatenated after prelude.lua in front of every script (store.go).

-- prequeue_open reports whether joins still go into the draw.
local function prequeue_open(k_frozen, now, onsale_at)
  return now < onsale_at and redis.call('EXISTS', k_frozen) == 0
end

-- prequeue_enter puts identity into the draw with the gateway's random
-- score, or its arrival time under the fifo dial.
local function prequeue_enter(k_dials, k_pre, k_ids, identity, random_score, now)
  local score = random_score
  if dial(k_dials, 'queueing', 'random') == 'fifo' then score = now end
  redis.call('ZADD', k_pre, score, identity)
  redis.call('HSET', k_ids, identity, 'pre')
end

-- freeze fixes the pre-queue at onsale, exactly once: its size becomes the
-- offset of every later arrival, and its members' ranks their places.
local function freeze(k_pre, k_frozen)
  local f = redis.call('GET', k_frozen)
  if f then return tonumber(f) end
  local n = redis.call('ZCARD', k_pre)
  redis.call('SET', k_frozen, n)
  return n
end

-- drawn_place is a pre-queue fan's place once frozen: its rank, from 1.
local function drawn_place(k_pre, identity)
  return redis.call('ZRANK', k_pre, identity) + 1
end

-- prequeue_leave takes identity out of a draw not yet made.
local function prequeue_leave(k_pre, k_frozen, identity)
  if redis.call('EXISTS', k_frozen) == 0 then redis.call('ZREM', k_pre, identity) end
end
