-- Release one hold of a fair lock; the last release wakes the head of the queue only
-- (RedissonFairLock's unlockInnerAsync on the same keys).
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- KEYS[5]  turn "redlatch_fair_turn:{name}" (HASH: the head whose turn runs, see fair_common.lua)
-- ARGV[1]  lease in milliseconds, applied again when holds remain
-- ARGV[2]  owner id
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  thread wait in milliseconds
-- ARGV[5]  the owner's hold count expected before the release ("0": any, as Redisson's)
-- ARGV[6]  optional: a waiter of the same client to pass the last hold to, if it heads the queue
-- ARGV[7]  with ARGV[6]: that waiter's lease in milliseconds
-- ARGV[8]  optional, with ARGV[6]: "again" for a pass sent again after its reply was lost
-- What makes a call safe to lose is ARGV[5], as in lock_unlock.lua: a call that finds another
-- count changes nothing, so of a call whose reply was lost and what follows it (the call sent
-- again, a settle), whichever runs second finds the count the first left. No unlock latch is
-- read or written (Redisson 4.7's writes one per unlock; 3.17's none).
-- Reply:   nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted, '0' published on the head's channel,
--                              whose turn starts: one thread wait from now to take the lock
--          3                   last hold passed to ARGV[6], the head: it leaves the queue and
--                              holds the lock (count 1, lease ARGV[7]), as if it had acquired;
--                              nothing published. Also when a call sent "again" finds it
--                              passed already
--          -1 - count          the owner's count is `count`, not ARGV[5]: nothing changed
--          error WRONGTYPE     a key holds another type (checked before anything is written)
local count = redis.call('hget', KEYS[1], ARGV[2]);
-- Counts compare as the strings HINCRBY and the client write.
if ARGV[5] ~= '0' and count ~= ARGV[5] then
    -- A pass sent again: the waiter it named holds the one hold a waiter can hold (it
    -- acquires nothing while a pass to it is in flight).
    if count == false and ARGV[8] == 'again' and redis.call('hget', KEYS[1], ARGV[6]) == '1' then
        return 3;
    end;
    return -1 - tonumber(count or 0);
end;
local wait = tonumber(ARGV[4]);
-- `now` is nil when nobody is queued: only a head's turn needs it.
local head, changed, now = fair_prune(KEYS[2], KEYS[3]);
if count ~= false and tonumber(count) <= 1 and head ~= false and head == ARGV[6] then
    -- What the head's own acquire would do, in this call.
    redis.call('del', KEYS[1]);
    redis.call('hset', KEYS[1], head, 1);
    redis.call('pexpire', KEYS[1], ARGV[7]);
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], head);
    return 3;
end;
if count ~= false and tonumber(count) <= 1 then
    redis.call('del', KEYS[1]);
    fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, 0, wait, true, ARGV[3], ARGV[2]);
    return 1;
end;
if changed then
    local pttl = fair_pttl(KEYS[1], wait);
    fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, pttl, wait, pttl == 0, ARGV[3], ARGV[2]);
end;
if count == false then
    return nil;
end;
redis.call('hincrby', KEYS[1], ARGV[2], -1);
redis.call('pexpire', KEYS[1], ARGV[1]);
return 0;
