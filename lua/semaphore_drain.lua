-- Take every available permit. Redisson's RedissonSemaphore.drainPermitsAsync, except that the
-- key keeps its expiry (Redisson's SET drops it) and a value that is not a number is refused.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- Reply:   integer             the permits taken: the count before, now 0 (the key keeps its
--                              expiry). Negative when the count was: it is raised to 0, as
--                              java.util.concurrent.Semaphore.drainPermits does. 0 when the key
--                              is absent (nothing written). Nothing is published: 0 permits
--                              serve no waiter.
--          error WRONGTYPE     the key is not a string holding a canonical integer below 2^53
--                              (what DECRBY takes, and Lua counts exactly): nothing changed
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
end;
return count;
