-- Take every available permit. Redisson's RedissonSemaphore.drainPermitsAsync, except that the
-- key keeps its expiry (Redisson's SET drops it) and a value that is not a number is refused.
-- A call tried again with the same receipt (after a lost reply) changes nothing more and
-- returns the first call's count.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  receipt "redisson_unlock_latch:{name}:<client uuid>-<n>": this call's, set to its
--          reply for ARGV[1] ms when it took any
-- ARGV[1]  the receipt's time to live in ms
-- Reply:   integer             the permits taken: the count before, now 0 (the key keeps its
--                              expiry). Negative when the count was: it is raised to 0, as
--                              java.util.concurrent.Semaphore.drainPermits does. 0 when the key
--                              is absent or the count 0 (nothing written). Nothing is
--                              published: 0 permits serve no waiter. For a call whose receipt
--                              is set, the first call's, and nothing done.
--          error WRONGTYPE     the key is not a string holding a canonical integer below 2^53
--                              (what DECRBY takes, and Lua counts exactly): nothing changed
local done = redis.call('get', KEYS[2]);
if done ~= false then
    return tonumber(done);
end;
local value = redis.call('get', KEYS[1]);
if value == false then
    return 0;
end;
-- Only what DECRBY takes, exactly (a canonical decimal integer below 2^53): anything else is
-- refused before anything is written.
local count = tonumber(value);
local canonical = value == '0' or string.match(value, '^%-?[1-9]%d*$') ~= nil;
if count == nil or not canonical or math.abs(count) >= 2 ^ 53 then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
if count ~= 0 then
    redis.call('decrby', KEYS[1], value);
    redis.call('set', KEYS[2], value, 'px', ARGV[1]);
end;
return count;
