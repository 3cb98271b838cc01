-- Delete a read-write lock held in the given mode, whoever holds it.
-- Redisson's RedissonReadLock/RedissonWriteLock.forceUnlockAsync.
-- KEYS[1]  lock name (HASH, see rw_read_acquire.lua)
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- ARGV[1]  the mode to break: "read" or "write"
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- Reply:   1                   it was held in that mode: deleted, "1" published (every waiter re-checks)
--          0                   not held in that mode: nothing changed
--          error WRONGTYPE     the key is not a hash
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1]);
    redis.call(ARGV[2], KEYS[2], '1');
    return 1;
end;
return 0;
