-- Set a semaphore's available permits, whether it exists or not. (Redisson's plain RSemaphore
-- has no such call; RedissonPermitExpirableSemaphore.setPermitsAsync is the model: it writes
-- the count and publishes it.) A semaphore that was not there is a new generation (see
-- lua/semaphore_acquire.lua); one that was keeps its own, so that permits taken from it
-- still go back.
-- KEYS[1]  semaphore name (STRING: available permits)
-- KEYS[2]  channel "redisson_sc:{name}"
-- KEYS[3]  generation "redlatch_semaphore:{name}" (STRING)
-- ARGV[1]  permits (>= 0)
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  the new generation, for a semaphore that was not there
-- Reply:   status OK           set (an expiry the key had is kept); ARGV[1] published on
--                              KEYS[2] (waiters whose needs fit are woken)
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local value = redis.call('get', KEYS[1]);
if value ~= false and (value ~= '0' and string.match(value, '^%-?[1-9]%d*$') == nil) then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
local ttl = redis.call('pttl', KEYS[1]);
redis.call('set', KEYS[1], ARGV[1]);
if ttl > 0 then
    redis.call('pexpire', KEYS[1], ttl);
end;
if value == false then
    redis.call('set', KEYS[3], ARGV[3]);
end;
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return redis.status_reply('OK');
