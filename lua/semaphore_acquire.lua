-- Take permits if enough are available. Redisson's RedissonSemaphore.tryAcquireAsync, with the
-- count in the reply so that a waiter can wake the others those permits may serve, a receipt
-- of what was taken so that an acquire whose reply is lost can be settled, and the
-- semaphore's generation, so that permits taken now are never given back into a semaphore
-- made again after a data loss.
-- KEYS[1]  semaphore name (STRING: available permits; absent = 0)
-- KEYS[2]  receipt "redisson_unlock_latch:{name}:<client uuid>-<n>" (a request's short-lived
--          key): set to "<permits taken>:<left>:<generation>", for ARGV[2] ms; see
--          lua/semaphore_settle.lua
-- KEYS[3]  generation "redlatch_semaphore:{name}" (STRING): who made this count; absent
--          until an acquire or a set of ours, which then writes a new one (with KEYS[1]'s
--          time to live): the request id "<client uuid>-<n>" ending KEYS[2], unique across
--          clients
-- ARGV[1]  permits wanted (>= 1)
-- ARGV[2]  the receipt's time to live in ms
-- Reply:   "<taken>:<left>:<generation>"  taken (the receipt's value: one string costs the
--                              server less than an array); `left` permits remain available
--          {0, available, exists} not enough: nothing changed; `exists` 1 if KEYS[1] exists,
--                                 0 if nobody set the semaphore up (it has no permits at all)
--          error WRONGTYPE        the key is not a string holding an integer (nothing changed)
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
    local generation = redis.call('get', KEYS[3]);
    if generation == false then
        generation = string.match(KEYS[2], '[^:]*$');
        local ttl = redis.call('pttl', KEYS[1]);
        if ttl > 0 then
            redis.call('set', KEYS[3], generation, 'px', ttl);
        else
            redis.call('set', KEYS[3], generation);
        end;
    end;
    local receipt = wanted .. ':' .. left .. ':' .. generation;
    redis.call('set', KEYS[2], receipt, 'px', ARGV[2]);
    return receipt;
end;
if value == false then
    return {0, 0, 0};
end;
return {0, available, 1};
