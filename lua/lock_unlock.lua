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
-- Reply:   nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted, "0" published on KEYS[2]
--          -1 - count          the owner's count is `count`, not ARGV[4]: nothing changed
--          error WRONGTYPE     the key exists and is not a hash
local count = redis.call('hget', KEYS[1], ARGV[2]);
-- Counts compare as the strings HINCRBY and the client write (decimal, no sign or zeros);
-- the expected count is never 0.
if ARGV[4] ~= nil and count ~= ARGV[4] then
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
redis.call('del', KEYS[1]);
redis.call(ARGV[3], KEYS[2], '0');
return 1;
