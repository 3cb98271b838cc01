-- A fenced lock's token counter "redisson_lock_token:{name}", for every script that hands out
-- a token (prepended after clock.lua, see src/scripts.rs).
--
-- token_check(key)      nil and the key's type ('string' or 'none') when the counter can be
--                       incremented, else an error reply to return before anything is written
-- token_next(key, kind) the next token: INCR, the counter first set to the server's TIME in
--                       microseconds when it is missing (kind 'none'), so that tokens never go
--                       back after the counter is lost

local function token_check(key)
    local kind = redis.call('type', key)['ok'];
    if kind == 'string' then
        local value = redis.call('get', key);
        -- Canonical digits only ('007' would make INCR fail), never negative (tokens start at
        -- 1), and exact in a Lua number.
        local canonical = value == '0' or string.match(value, '^[1-9]%d*$') ~= nil;
        if not canonical or tonumber(value) >= 2 ^ 53 - 1 then
            return redis.error_reply('WRONGTYPE the fencing token counter is not an integer');
        end;
    elseif kind ~= 'none' then
        return redis.error_reply('WRONGTYPE the fencing token counter is not a string');
    end;
    return nil, kind;
end;

local function token_next(key, kind)
    if kind == 'none' then
        -- No counter: the first acquire ever, or the counter went with the server's data (a
        -- restart without persistence, a failover to a replica that lacked it). Tokens go on
        -- from the server's clock in microseconds, so that they stay above every token handed
        -- out before, as long as the clock did not step back (and fewer than a million were
        -- taken per second). Written as digits: a Lua number would be formatted as a float.
        redis.call('set', key, clock_us_digits());
    end;
    return redis.call('incr', key);
end;
