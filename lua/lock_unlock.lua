-- Release one hold of a reentrant lock. Same semantics as Redisson's RedissonLock.unlockInnerAsync.
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  lock channel "redisson_lock__channel:{name}"
-- KEYS[3]  unlock latch "redisson_unlock_latch:{name}:<request id>": makes a retried call idempotent
-- ARGV[1]  message to publish when the lock is freed ("0": wake one waiter)
-- ARGV[2]  lease in milliseconds, applied again when holds remain
-- ARGV[3]  owner id
-- ARGV[4]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[5]  latch time-to-live in milliseconds
-- Reply:   the latch value when this request already ran (a retry): 0 or 1 as below
--          nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted, ARGV[1] published on KEYS[2]
--          error WRONGTYPE     the key exists and is not a hash
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
-- HGET instead of Redisson's HEXISTS + HINCRBY: same outcome, one call less on the last hold.
local count = redis.call('hget', KEYS[1], ARGV[3]);
if count == false then
    return nil;
end;
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1);
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return 1;
end;
