-- Take permits if enough are available. Redisson's RedissonSemaphore.tryAcquireAsync, with the
-- count in the reply so that a waiter can wake the others those permits may serve, and a
-- receipt of what was taken so that an acquire whose reply is lost can be settled.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  receipt "redisson_unlock_latch:{name}:<client uuid>-<n>" (a request's short-lived
--          key): set to the permits taken, for ARGV[2] ms; see lua/semaphore_settle.lua
-- ARGV[1]  permits wanted (>= 1)
-- ARGV[2]  the receipt's time to live in ms
-- Reply:   {1, left}            taken; `left` permits remain available; receipt written
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
    local left = redis.call('decrby', KEYS[1], wanted);
    redis.call('set', KEYS[2], wanted, 'px', ARGV[2]);
    return {1, left};
end;
return {0, available};
