-- Release one hold of a reentrant lock. What it leaves is what Redisson's
-- RedissonLock.unlockInnerAsync leaves (the hash, its count and PEXPIRE, the message "0" on the
-- lock channel), for less: no unlock latch is read or written, and one HGET stands for
-- Redisson's HEXISTS + HINCRBY. What makes a call safe to lose instead is ARGV[4]: the count
-- the caller expects before the release. A call that finds another count changes nothing, so
-- of a call whose reply was lost and the settle that follows it (see `lock/raw.rs`), whichever
-- runs second finds the count the first left, and does nothing.
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  lock channel "redisson_lock__channel:{name}"
-- ARGV[1]  lease in milliseconds, applied again when holds remain
-- ARGV[2]  owner id
-- ARGV[3]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[4]  optional: the owner's hold count expected before the release
-- ARGV[5]  optional (with ARGV[4] "1"): a waiter of the same client to pass the hold to
-- ARGV[6]  with ARGV[5]: that waiter's lease in milliseconds
-- ARGV[7]  optional, with ARGV[5]: "again" for a pass sent again after its reply was lost
-- Reply:   nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted, "0" published on KEYS[2]
--          3                   last hold passed to ARGV[5]: its field is 1 and the lease
--                              ARGV[6], nothing published (the lock stays held, as for a
--                              Java peer a long hold does); also when a call sent "again"
--                              finds it passed already
--          -1 - count          the owner's count is `count`, not ARGV[4]: nothing changed
--          error WRONGTYPE     the key exists and is not a hash
local count = redis.call('hget', KEYS[1], ARGV[2]);
-- Counts compare as the strings HINCRBY and the client write (decimal, no sign or zeros);
-- the expected count is never 0.
if ARGV[4] ~= nil and count ~= ARGV[4] then
    -- A pass whose reply was lost, sent again: the waiter it named holds the one hold a
    -- waiter can hold (it acquires nothing while a pass to it is in flight).
    if count == false and ARGV[7] == 'again' and redis.call('hget', KEYS[1], ARGV[5]) == '1' then
        return 3;
    end;
    return -1 - tonumber(count or 0);
end;
if count == false then
    return nil;
end;
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 0;
end;
if ARGV[5] ~= nil then
    redis.call('hdel', KEYS[1], ARGV[2]);
    redis.call('hset', KEYS[1], ARGV[5], 1);
    redis.call('pexpire', KEYS[1], ARGV[6]);
    return 3;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[3], KEYS[2], '0');
return 1;
