-- Set a rate limiter's rate, interval and type unless they are set (Redisson's trySetRate,
-- which sets each field apart and so can leave a config half made: this one sets all three
-- or none). Sent once: a call tried again after a lost reply finds its receipt.
-- KEYS[1]  config "name" (HASH, see lua/rate_common.lua)
-- KEYS[2]  this call's receipt "redisson_unlock_latch:{name}:<client uuid>-<n>"
-- ARGV[1]  rate (>= 1)
-- ARGV[2]  interval in ms (>= 1)
-- ARGV[3]  type: "0" overall, "1" per client
-- ARGV[4]  the receipt's time to live in ms
-- Reply:   1   set
--          0   a complete config was there: nothing changed
local made = redis.call('get', KEYS[2]);
if made then
    return tonumber(made);
end;
-- Complete as lua/rate_common.lua's rate_config reads it (that prelude names five keys).
local c = redis.call('hmget', KEYS[1], 'rate', 'interval', 'type');
local set = 0;
if tonumber(c[1]) == nil or tonumber(c[2]) == nil or (c[3] ~= '0' and c[3] ~= '1') then
    redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3]);
    set = 1;
end;
redis.call('set', KEYS[2], set, 'px', ARGV[4]);
return set;
