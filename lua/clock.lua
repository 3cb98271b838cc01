-- The server's clock (TIME), for every script that reads it: prepended first (see
-- src/scripts.rs), so that the time is computed in one place.
--
-- clock_ms()         the time in ms
-- clock_us_digits()  the time in µs, as decimal digits (a Lua number would print as a float)

local function clock_ms()
    local t = redis.call('time');
    -- Arithmetic takes the digits as numbers: no tonumber calls (a tenth of a script's cost).
    return t[1] * 1000 + math.floor(t[2] / 1000);
end;

local function clock_us_digits()
    local t = redis.call('time');
    return t[1] .. string.format('%06d', tonumber(t[2]));
end;

