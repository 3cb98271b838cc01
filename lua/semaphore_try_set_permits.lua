-- Set a semaphore's permits if it has none yet. Redisson's RedissonSemaphore.trySetPermitsAsync.
-- KEYS[1]  semaphore name (STRING: available permits)
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  permits
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- Reply:   1                   set; ARGV[1] published on KEYS[2] (waiters re-check)
--          0                   the semaphore exists already: nothing changed
--          error WRONGTYPE     the key exists and is not a string
if redis.call('get', KEYS[1]) ~= false then
    return 0;
end;
redis.call('set', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return 1;
