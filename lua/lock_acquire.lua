-- Acquire (or re-enter) a reentrant lock. Same semantics as Redisson's RedissonLock.tryLockInnerAsync.
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- Reply:   nil                 acquired (or re-entered): the owner's count was incremented, PEXPIRE lease
--          integer             not acquired: the lock's PTTL in ms (-1 if the key has no expiry)
--          error WRONGTYPE     the key exists and is not a hash
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
