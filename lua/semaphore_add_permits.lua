-- Add (or, negative, take away) permits; also the release of acquired permits.
-- Redisson's RedissonSemaphore.releaseAsync / addPermitsAsync.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  channel "redisson_sc:{name}"
-- ARGV[1]  permits to add (may be negative)
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- Reply:   integer             the new number of available permits, also published on KEYS[2]
--                              (waiters whose needs fit are woken)
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local value = redis.call('get', KEYS[1]);
if value ~= false and tonumber(value) == nil then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
local count = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], count);
return count;
