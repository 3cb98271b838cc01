-- Release one hold of a fair lock; the last release wakes the head of the queue only
-- (RedissonFairLock's unlockInnerAsync on the same keys).
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- KEYS[5]  unlock latch "redisson_unlock_latch:{name}:<request id>": makes a retried call idempotent
-- KEYS[6]  turn "redlatch_fair_turn:{name}" (HASH: the head whose turn runs, see fair_common.lua)
-- ARGV[1]  lease in milliseconds, applied again when holds remain
-- ARGV[2]  owner id
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  latch time-to-live in milliseconds
-- ARGV[5]  thread wait in milliseconds
-- ARGV[6]  optional: a waiter of the same client to pass the last hold to, if it heads the queue
-- ARGV[7]  with ARGV[6]: that waiter's lease in milliseconds
-- ARGV[8]  optional, with ARGV[6]: "again" for a pass sent again after its reply was lost
-- Reply:   the latch value when this request already ran (a retry): 0, 1 or 3 as below
--          nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted, '0' published on the head's channel,
--                              whose turn starts: one thread wait from now to take the lock
--          3                   last hold passed to ARGV[6], the head: it leaves the queue and
--                              holds the lock (count 1, lease ARGV[7]), as if it had acquired;
--                              nothing published. Also when a call sent "again" after its
--                              latch expired finds it passed already
--          error WRONGTYPE     a key holds another type (checked before anything is written)
local val = redis.call('get', KEYS[5]);
if val ~= false then
    return tonumber(val);
end;
local count = redis.call('hget', KEYS[1], ARGV[2]);
-- A pass sent again: the waiter it named holds the one hold a waiter can hold (it acquires
-- nothing while a pass to it is in flight).
if count == false and ARGV[8] == 'again' and redis.call('hget', KEYS[1], ARGV[6]) == '1' then
    return 3;
end;
local now = clock_ms();
local wait = tonumber(ARGV[5]);
local head, changed = fair_prune(KEYS[2], KEYS[3], now);
if count ~= false and tonumber(count) <= 1 and head ~= false and head == ARGV[6] then
    -- What the head's own acquire would do, in this call.
    redis.call('del', KEYS[1]);
    redis.call('hset', KEYS[1], head, 1);
    redis.call('pexpire', KEYS[1], ARGV[7]);
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], head);
    redis.call('set', KEYS[5], 3, 'px', ARGV[4]);
    return 3;
end;
if count ~= false and tonumber(count) <= 1 then
    redis.call('del', KEYS[1]);
    redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
    fair_turn(head, KEYS[3], KEYS[6], KEYS[4], now, 0, wait, true, ARGV[3], ARGV[2]);
    return 1;
end;
if changed then
    local pttl = fair_pttl(KEYS[1], wait);
    fair_turn(head, KEYS[3], KEYS[6], KEYS[4], now, pttl, wait, pttl == 0, ARGV[3], ARGV[2]);
end;
if count == false then
    return nil;
end;
redis.call('hincrby', KEYS[1], ARGV[2], -1);
redis.call('pexpire', KEYS[1], ARGV[1]);
redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
return 0;
