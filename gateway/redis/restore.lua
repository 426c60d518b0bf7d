-- restore: a fan's signed queue token puts back a place Redis lost.
--
-- What a master failover can lose. Redis replicates asynchronously, so a
-- killed master's replica takes over without the last writes the master
-- acknowledged (on loopback usually nothing, on a network the last few
-- milliseconds; loadtest/proof's failover test makes it lose a whole
-- second). Every key of an event shares the slot {evt:<id>}, so one master
-- holds them all and what is lost is a suffix of that event's writes, in
-- order:
--   * a join: the identity's ids entry and its INCR of seq. The fan holds a
--     token for place p, but the store does not know it, and seq is behind:
--     the next joiners are given p and the places after it again.
--   * a claim: the session (active), the claim (claims), 'done' and the
--     offer's removal. The fan holds its admit token and its queue token
--     says admitted, so its polls never ask the store again.
--   * a move to the back (a lapsed offer claimed late): ids says the old
--     place, the token the new one.
--   * a tick: serving, tokens, last and its offers. The next ticks offer
--     the same places again (serving is behind), never more than one
--     second's worth at once (admission_bucket.lua's no-burst rule, which
--     the reverted 'last' cannot get round: tokens never exceed a second).
--   * a pre-queue join (ids 'pre', the draw's entry), and a freeze made in
--     the same lost moment (the next one freezes again, without the lost
--     entries).
--
-- Rule 1: the signed token is the fan's proof of place. Queue tokens are
-- HS256-signed by the gateways (gateway/token) and carry event, identity,
-- place and the room's epoch, so a fan cannot make one up. When a claim or
-- a pre-queue fan's position lookup finds the identity unknown, or a claim
-- finds it at a smaller place than its token (places of an identity only
-- ever grow, so the larger one is the write the store lost), when a poll
-- finds the fan's place beyond the line (frozen + seq: the bucket never
-- offers past it, so a lost join at the back would wait for ever), and
-- when a fan joins again holding its token, the gateway
-- (gateway/http/queue.go) runs this script with the token's place. Only a
-- token of the room's current epoch restores (a room Redis lost entirely
-- starts a new epoch: its tokens rejoin). This script:
--   * a numbered place p: ids = p only if the identity is unknown or holds
--     a smaller place, and seq = max(seq, p - frozen), so no later joiner
--     is given p or any place before it again;
--   * the pre-queue (place 0) while the draw is open: back into the draw
--     with a fresh random lot (the same chance as any early fan);
--   * the pre-queue after the draw was made without it (its join and the
--     draw fell on either side of the failover): a random place among the
--     places the draw holds that have not been offered yet (serving+1 ..
--     frozen; the next place to offer once all have been), shared with the
--     fan drawn there. The draw itself cannot change: its ranks are places
--     already handed out. The fan keeps an early fan's chance; the cost is
--     one more admission at that place (rule 2);
--   * a drawn pre-queue fan whose move to the back was lost (ids still
--     'pre', the token a place beyond the draw): the token's place, as for
--     any lost move to the back;
--   * an admitted token whose claim was lost: 'done' again (one session
--     per identity), and the session back in active while it lasts, so the
--     cap counts it. (When 'done' survived, the claim did too; a session
--     then missing from active was ended by the fan's leave, and stays
--     ended.)
--
-- Rule 2 (claim.lua): two identities at one place. A lost join, then a new
-- joiner given the same place, then the restore: both hold p. The first
-- claim removes p's offer; the second finds it gone but p claimed within
-- claim_seconds (the claims zset) and is admitted too, never sent to the
-- back.
--
-- The bound. Per failover, admissions beyond the dials are at most
--     max(1, new_users_per_minute / 60)  +  L_claims  +  L_restored
-- where L_claims is the claims acknowledged in the lost window (their
-- sessions are missing from active, so the cap undercounts by that many
-- until each fan's token restores its session (only a join that carries
-- the queue cookie does: an admitted fan's polls are answered from the
-- token and never reach the store) or, at the latest, until the sessions
-- would have ended, session_seconds after the claims; and a lost 'done'
-- can let such a fan in once more) and L_restored the fans restored at a place another
-- fan had been given meanwhile (at most the joins in the lost window). The
-- one second of the rate is the bucket's own allowance at the failover:
-- serving + tokens never exceeds rate x (time since admission began) + one
-- second's worth, and a lost tick only takes the bucket back to an
-- earlier state that kept that invariant, so the places offered by any
-- time stay within it, lost tick or not (the core-health factor only
-- lowers the rate). No fan who held a place loses it: at worst it shares it.
-- loadtest/proof/redisfailover_test.go measures all three terms around a
-- real failover with a second of lost writes, against this figure.
--
-- Why no WAIT after a join. `WAIT 1 100` after each join would shrink the
-- lost window for joins to the replica's acknowledgement, at a price:
-- BenchmarkJoinWait (loadtest/topology) measured the join script at 26,100
-- to 34,600 joins/s without it and 16,800 to 20,900 with it (a third less;
-- 16 clients on loopback, three runs), and
-- on a network each join would wait a round trip to the replica, at the
-- onsale burst, when joins peak. It would still not make a join durable:
-- when the replica is slow or resyncing, WAIT times out, and the gateway
-- either refuses joins (the room closes whenever a replica hiccups) or
-- acknowledges anyway (the same loss as without). The token already makes
-- a lost join harmless to the fan; what WAIT would save is the L_restored
-- term of the bound (shared places), a few fans per failover on a LAN. Not
-- worth a third of the join capacity.
--
-- Not covered: a fan who threw its token away (no proof, no place); a
-- join with no acknowledgement (the fan got a 503 and joins again).
--
-- KEYS: dials, pre, ids, frozen, seq, bucket, active
-- ARGV: identity, place (0: pre-queue), admitted until (unix ms, 0: not
--       admitted), epoch, random score (crypto/rand, for the draw)
-- Returns {outcome, n}: kept (n: the place the store has, 0 in the draw),
-- restored (n: the place), prequeue (back in the open draw), ended (the
-- identity's session is over), rejoin (another epoch, or no room), off.
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 0 then return {'rejoin', 0} end
if (redis.call('HGET', KEYS[1], 'epoch') or '') ~= ARGV[4] then return {'rejoin', 0} end
-- The failover test's control switches the rule off for one event to show
-- what it prevents; no API sets this field.
if redis.call('HGET', KEYS[1], 'no_restore') == '1' then return {'off', 0} end
local identity, place, admitted = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cur = redis.call('HGET', KEYS[3], identity)

if admitted > 0 then
  -- 'done' already: the claim's writes survived (a claim writes 'done' and
  -- the session in one script, so a failover loses both or neither), and
  -- a session missing from active was ended by the fan (leave.lua): it
  -- stays ended.
  if cur ~= 'done' then
    redis.call('HSET', KEYS[3], identity, 'done')
    if admitted > now and not redis.call('ZSCORE', KEYS[7], identity) then
      redis.call('ZADD', KEYS[7], admitted, identity)
      keep(KEYS[1], KEYS[7])
    end
  end
  return {'ended', 0}
end
if cur == 'done' then return {'ended', 0} end
if cur == 'pre' then
  if redis.call('EXISTS', KEYS[4]) == 0 then return {'kept', 0} end
  -- A token's place beyond the draw is not a drawn one: the fan's drawn
  -- offer lapsed and claim.lua moved it to the back, and the failover
  -- lost the move. It is restored below, like any lost move to the back.
  if place <= tonumber(redis.call('GET', KEYS[4])) then
    return {'kept', drawn_place(KEYS[2], identity)}
  end
elseif cur and tonumber(cur) >= place then
  return {'kept', tonumber(cur)}
end

-- The identity is unknown, or at a smaller place than its token's.
local onsale_at = dial(KEYS[1], 'onsale_at', 0)
-- (A numbered place before the draw is made cannot be this room's: never
-- freeze the draw early for it.)
if place > 0 and prequeue_open(KEYS[4], now, onsale_at) then return {'kept', 0} end
if place == 0 then
  if cur then return {'kept', tonumber(cur)} end
  if prequeue_open(KEYS[4], now, onsale_at) then
    prequeue_enter(KEYS[1], KEYS[2], KEYS[3], identity, ARGV[5], now)
    return {'prequeue', 0}
  end
  local n = freeze(KEYS[2], KEYS[4])
  local lo = tonumber(redis.call('HGET', KEYS[6], 'serving') or 0) + 1
  local hi = math.max(lo, n)
  place = lo + math.floor(tonumber(ARGV[5]) / 9007199254740992 * (hi - lo + 1))
  if place > hi then place = hi end
end
local n = freeze(KEYS[2], KEYS[4])
redis.call('HSET', KEYS[3], identity, place)
local seq = tonumber(redis.call('GET', KEYS[5]) or 0)
-- KEEPTTL: seq expires with the room (prelude.lua, keep).
if place - n > seq then redis.call('SET', KEYS[5], place - n, 'KEEPTTL') end
return {'restored', place}
