-- Set a semaphore's permits if it has none yet, optionally with an expiry. Redisson's
-- RedissonSemaphore.trySetPermitsAsync(permits) and trySetPermitsAsync(permits, timeToLive)
-- (SET ... PX); a semaphore made here is a new generation (see lua/semaphore_acquire.lua):
-- permits taken from one that was there before are never given back into it.
-- KEYS[1]  semaphore name (STRING: available permits)
-- KEYS[2]  channel "redisson_sc:{name}"
-- KEYS[3]  generation "redlatch_semaphore:{name}" (STRING), given KEYS[1]'s expiry
-- ARGV[1]  permits
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  the new generation
-- ARGV[4]  optional: time to live in ms (>= 1); absent = no expiry
-- Reply:   1                   set; ARGV[1] published on KEYS[2] (waiters re-check); or
--                              KEYS[3] is ARGV[3] already: this call was made before (its
--                              reply was lost), nothing changed
--          0                   the semaphore exists already: nothing changed
--          error WRONGTYPE     the key exists and is not a string
if redis.call('get', KEYS[1]) ~= false then
    if redis.call('get', KEYS[3]) == ARGV[3] then
        return 1;
    end;
    return 0;
end;
if ARGV[4] then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[4]);
    redis.call('set', KEYS[3], ARGV[3], 'px', ARGV[4]);
else
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call('set', KEYS[3], ARGV[3]);
end;
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return 1;
