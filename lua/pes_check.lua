-- First prelude of every pes_*.lua script (prepended by src/scripts.rs): defines `now` (ms on
-- the server's clock), `int` and `count` (the available permits, 0 if the key is absent), and
-- checks the count's type before anything is read further or written. The timeout set's type
-- is checked by the first call on it: lua/pes_common.lua's reclaim, the first write, under
-- `pcall`; a read-only script's read (which fails with WRONGTYPE, having written nothing).
-- Writes nothing: the read-only scripts (pes_counts.lua, pes_lease.lua) run it alone.
local now = clock_ms();
local function int(n)
    return string.format('%d', n);
end;
local count = 0;
-- One read tells all: absent (false), another type (an error) or the count. (TYPE, then GET,
-- cost twice as much.)
local value = redis.pcall('get', KEYS[1]);
if type(value) == 'table' then
    return redis.error_reply('WRONGTYPE the permit count is not a string');
elseif value then
    count = tonumber(value);
    -- Canonical digits only (no '007', '-0' or '+1'): what INCRBY/DECRBY accept, so no write below fails.
    local canonical = value == '0' or string.match(value, '^%-?[1-9]%d*$') ~= nil;
    if count == nil or not canonical or math.abs(count) >= 2 ^ 53 then
        return redis.error_reply('WRONGTYPE the permit count is not an integer');
    end;
end;
