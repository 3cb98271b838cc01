-- Give permits back once: a call tried again with the same latch (after a lost reply) changes
-- nothing more and returns the first call's count. Redisson's RedissonSemaphore.releaseAsync,
-- made idempotent as its unlock is.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  channel "redisson_sc:{name}"
-- KEYS[3]  latch "redisson_unlock_latch:{name}:<client uuid>-<n>": this release's, set to the
--          count after it, for ARGV[3] ms
-- ARGV[1]  permits to give back (>= 1)
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  the latch's time to live in ms
-- Reply:   integer             the count after the release (published on KEYS[2]); for a
--                              call whose latch is set, the first call's, and nothing done
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local done = redis.call('get', KEYS[3]);
if done ~= false then
    return tonumber(done);
end;
local value = redis.call('get', KEYS[1]);
if value ~= false and tonumber(value) == nil then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
local count = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], count);
redis.call('set', KEYS[3], count, 'px', ARGV[3]);
return count;
