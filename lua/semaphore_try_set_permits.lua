-- Set a semaphore's permits if it has none yet, optionally with an expiry. Redisson's
-- RedissonSemaphore.trySetPermitsAsync(permits) and trySetPermitsAsync(permits, timeToLive)
-- (SET ... PX).
-- KEYS[1]  semaphore name (STRING: available permits)
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  permits
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  optional: time to live in ms (>= 1); absent = no expiry
-- Reply:   1                   set; ARGV[1] published on KEYS[2] (waiters re-check)
--          0                   the semaphore exists already: nothing changed
--          error WRONGTYPE     the key exists and is not a string
if redis.call('get', KEYS[1]) ~= false then
    return 0;
end;
if ARGV[3] then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]);
else
    redis.call('set', KEYS[1], ARGV[1]);
end;
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return 1;
