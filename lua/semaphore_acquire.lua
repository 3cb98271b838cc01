-- Take permits if enough are available. Redisson's RedissonSemaphore.tryAcquireAsync, with the
-- count in the reply so that a waiter can wake the others those permits may serve.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- ARGV[1]  permits wanted (>= 1)
-- Reply:   {1, left}            taken; `left` permits remain available
--          {0, available}       not enough: nothing changed
--          error WRONGTYPE      the key is not a string holding an integer (nothing changed)
local value = redis.call('get', KEYS[1]);
local available = 0;
if value ~= false then
    available = tonumber(value);
    if available == nil then
        return redis.error_reply('WRONGTYPE semaphore value is not an integer');
    end;
end;
local wanted = tonumber(ARGV[1]);
if available >= wanted then
    return {1, redis.call('decrby', KEYS[1], wanted)};
end;
return {0, available};
