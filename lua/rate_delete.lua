-- Delete a rate limiter (its config, the overall count and permits, and this client's per
-- client ones, as Redisson's delete), and wake its waiters, which find it gone.
-- KEYS[1]  config "name" (HASH)
-- KEYS[2]  permits left "{name}:value"
-- KEYS[3]  this client's permits left "{name}:value:<client id>"
-- KEYS[4]  permits taken "{name}:permits" (ZSET)
-- KEYS[5]  this client's permits taken "{name}:permits:<client id>"
--          (all as lua/rate_common.lua says)
-- KEYS[6]  the limiter's channel "redlatch_rate:{name}" (see src/keys.rs)
-- ARGV[1]  publish command (PUBLISH or SPUBLISH); the message, "deleted", wakes every waiter
-- Reply:   1 where the config was there, else 0
local existed = redis.call('exists', KEYS[1]);
redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]);
redis.call(ARGV[1], KEYS[6], 'deleted');
return existed;
