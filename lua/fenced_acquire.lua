-- Acquire (or re-enter) a fenced lock and take a fencing token. Same keys and semantics as
-- Redisson's RedissonFencedLock.tryLockInnerAsync (the token-returning variant): the token
-- counter is incremented on every acquire, re-entries included, and never expires. One
-- difference: a missing counter starts from the server's clock, not from 1 (see the reply).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  token counter "redisson_lock_token:{name}" (STRING, integer)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- Reply:   {count, token}       acquired (or re-entered): hold count + 1 = count, PEXPIRE lease,
--                               token = INCR KEYS[2] (Redisson replies {-1, token}); a missing
--                               counter is first set to the server's TIME in microseconds
--                               (Redisson's starts again from 1), so tokens never go back
--                               after the counter is lost
--          integer              not acquired: the lock's PTTL in ms (-1 if the key has no expiry)
--          error WRONGTYPE      the lock key is not a hash or the token key not a non-negative
--                               integer string below 2^53 - 1
--                               (checked before anything is written)
local kind = redis.call('type', KEYS[2])['ok'];
if kind == 'string' then
    local value = redis.call('get', KEYS[2]);
    -- Canonical digits only ('007' would make INCR fail), never negative (tokens start at 1),
    -- and exact in a Lua number.
    local canonical = value == '0' or string.match(value, '^[1-9]%d*$') ~= nil;
    if not canonical or tonumber(value) >= 2 ^ 53 - 1 then
        return redis.error_reply('WRONGTYPE the fencing token counter is not an integer');
    end;
elseif kind ~= 'none' then
    return redis.error_reply('WRONGTYPE the fencing token counter is not a string');
end;
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    if kind == 'none' then
        -- No counter: the first acquire ever, or the counter went with the server's data (a
        -- restart without persistence, a failover to a replica that lacked it). Tokens go on
        -- from the server's clock in microseconds, so that they stay above every token handed
        -- out before, as long as the clock did not step back (and fewer than a million were
        -- taken per second). Written as digits: a Lua number would be formatted as a float.
        redis.call('set', KEYS[2], clock_us_digits());
    end;
    local token = redis.call('incr', KEYS[2]);
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return {count, token};
end;
return redis.call('pttl', KEYS[1]);
