-- Take every available permit. Redisson's RedissonSemaphore.drainPermitsAsync, except that the
-- key keeps its expiry (Redisson's SET drops it) and a value that is not a number is refused.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- Reply:   integer             the permits taken: the count before, now 0 (the key keeps its
--                              expiry). Negative when the count was: it is raised to 0, as
--                              java.util.concurrent.Semaphore.drainPermits does. 0 when the key
--                              is absent (nothing written). Nothing is published: 0 permits
--                              serve no waiter.
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local value = redis.call('get', KEYS[1]);
if value == false then
    return 0;
end;
local count = tonumber(value);
if count == nil then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
if count ~= 0 then
    redis.call('decrby', KEYS[1], value);
end;
return count;
