-- The reference, not used by redlatch: Redisson's lock acquire, call for call as
-- RedissonLock.tryLockInnerAsync sends it (redisson/src/main/java/org/redisson/RedissonLock.java,
-- lines 214 to 224, at 6686397 of August 2026).
-- KEYS[1]  lock name
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- Reply:   nil when acquired or re-entered, else the lock's PTTL
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
