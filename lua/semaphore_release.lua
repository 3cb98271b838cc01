-- Give permits back once: a call tried again with the same latch (after a lost reply) changes
-- nothing more and returns the first call's count. Redisson's RedissonSemaphore.releaseAsync,
-- made idempotent as its unlock is; a guard's release also names the generation its permits
-- were taken in, and is dropped when the semaphore is no longer that one (made again after a
-- data loss, or expired and set again).
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  channel "redisson_sc:{name}"
-- KEYS[3]  latch "redisson_unlock_latch:{name}:<client uuid>-<n>": this release's, set to the
--          count after it, for ARGV[3] ms
-- KEYS[4]  generation "redlatch_semaphore:{name}" (see lua/semaphore_acquire.lua)
-- ARGV[1]  permits to give back (>= 1)
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  the latch's time to live in ms
-- ARGV[4]  optional: the generation the permits were taken in; absent = any (a release of
--          permits nobody here took, as Redisson's)
-- Reply:   count               given back: the count after the release (published on
--                              KEYS[2]); for a call whose latch is set, the first call's,
--                              and nothing done. (An integer costs the server less than an
--                              array.)
--          {0, available}      dropped: KEYS[4] is not ARGV[4] (nothing changed)
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local done = redis.call('get', KEYS[3]);
if done ~= false then
    return tonumber(done);
end;
if ARGV[4] and redis.call('get', KEYS[4]) ~= ARGV[4] then
    local value = redis.pcall('get', KEYS[1]);
    return {0, type(value) == 'string' and tonumber(value) or 0};
end;
-- INCRBY refuses a value that is no integer before it writes anything.
local count = redis.pcall('incrby', KEYS[1], ARGV[1]);
if type(count) == 'table' then
    -- Any other refusal (a replica's READONLY on a server before 7.0, which runs the
    -- script: the client tries again) goes back as it came.
    if string.sub(count.err, 1, 8) == 'READONLY' then
        return redis.error_reply(count.err);
    end;
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
redis.call(ARGV[2], KEYS[2], count);
redis.call('set', KEYS[3], count, 'px', ARGV[3]);
return count;
