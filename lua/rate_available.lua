-- What a rate limiter has left now, and when its next permits come back (reads only).
-- KEYS[1]  config "name" (HASH)
-- KEYS[2]  permits left "{name}:value"
-- KEYS[3]  this client's permits left "{name}:value:<client id>"
-- KEYS[4]  permits taken "{name}:permits" (ZSET)
-- KEYS[5]  this client's permits taken "{name}:permits:<client id>"
--          (all as lua/rate_common.lua says)
-- Reply:   {left, back_in}  permits left now; ms until the oldest permit taken in the last
--                           interval is back (-1 where none is taken)
--          error NORATE     no complete config
local rate, interval, type = rate_config();
if rate == nil then
    return not_set();
end;
local value_key, permits_key = rate_keys(type);
local now = clock_ms();
local left, back_in = rate_status(rate, interval, value_key, permits_key, now, type);
return {left, back_in};
