-- First prelude of every pes_*.lua script (prepended by src/scripts.rs): defines `now` (ms on
-- the server's clock), `int` and `count` (the available permits, 0 if the key is absent), and
-- checks both keys' types before anything is read further or written. Writes nothing: the
-- read-only scripts (pes_counts.lua, pes_lease.lua) run it alone.
local now = clock_ms();
local function int(n)
    return string.format('%d', n);
end;
local count = 0;
local kind = redis.call('type', KEYS[1])['ok'];
if kind == 'string' then
    local value = redis.call('get', KEYS[1]);
    count = tonumber(value);
    -- Canonical digits only (no '007', '-0' or '+1'): what INCRBY/DECRBY accept, so no write below fails.
    local canonical = value == '0' or string.match(value, '^%-?[1-9]%d*$') ~= nil;
    if count == nil or not canonical or math.abs(count) >= 2 ^ 53 then
        return redis.error_reply('WRONGTYPE the permit count is not an integer');
    end;
elseif kind ~= 'none' then
    return redis.error_reply('WRONGTYPE the permit count is not a string');
end;
kind = redis.call('type', KEYS[2])['ok'];
if kind ~= 'none' and kind ~= 'zset' then
    return redis.error_reply('WRONGTYPE the permit timeout key is not a sorted set');
end;
