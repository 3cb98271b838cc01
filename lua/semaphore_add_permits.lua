-- Add (or, negative, take away) permits. Redisson's RedissonSemaphore.addPermitsAsync, made
-- idempotent as a release is: a call tried again with the same receipt (after a lost reply)
-- changes nothing more and returns the first call's count.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  channel "redisson_sc:{name}"
-- KEYS[3]  receipt "redisson_unlock_latch:{name}:<client uuid>-<n>": this call's, set to the
--          count after it, for ARGV[3] ms
-- ARGV[1]  permits to add (may be negative)
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   integer             the new number of available permits, also published on KEYS[2]
--                              (waiters whose needs fit are woken); for a call whose receipt
--                              is set, the first call's, and nothing done
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
