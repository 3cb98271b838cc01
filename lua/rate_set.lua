-- Set a rate limiter's rate, interval and type, keeping what was taken: the permits taken in
-- the new interval still count (Redisson's setRate starts afresh, admitting a whole new
-- interval's worth at once; its 4.4 updateRate with keepState does the same as this). A
-- change of type starts afresh, as Redisson's does: the other type's keys (this client's)
-- are deleted.
-- KEYS[1]  config "name" (HASH)
-- KEYS[2]  permits left "{name}:value"
-- KEYS[3]  this client's permits left "{name}:value:<client id>"
-- KEYS[4]  permits taken "{name}:permits" (ZSET)
-- KEYS[5]  this client's permits taken "{name}:permits:<client id>"
--          (all as lua/rate_common.lua says)
-- KEYS[6]  the limiter's channel "redlatch_rate:{name}" (see src/keys.rs)
-- ARGV[1]  rate (>= 1)
-- ARGV[2]  interval in ms (>= 1)
-- ARGV[3]  type: "0" overall, "1" per client
-- ARGV[4]  publish command (PUBLISH or SPUBLISH)
-- Reply:   left   the permits left under the new rate (0 where what was taken is over it);
--                  "rate" is published on KEYS[6], which wakes every waiter to re-check
--          error WRONGTYPE   a key is not a limiter's (nothing changed)
local old = redis.call('hget', KEYS[1], 'type');
local value_key, permits_key = rate_keys(ARGV[3]);
if old == false or old == ARGV[3] then
    -- Kept, so checked before anything is written (a change of type deletes them).
    local vt = redis.call('type', value_key).ok;
    local pt = redis.call('type', permits_key).ok;
    if (vt ~= 'none' and vt ~= 'string') or (pt ~= 'none' and pt ~= 'zset') then
        return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
    end;
end;
redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3]);
if old ~= false and old ~= ARGV[3] then
    redis.call('del', KEYS[2], KEYS[3], KEYS[4], KEYS[5]);
end;
local rate, interval, type, keep_alive = rate_config();
local now = clock_ms();
redis.call('zremrangebyscore', permits_key, '-inf', now - interval);
local used = sum_permits(redis.call('zrange', permits_key, 0, -1));
-- Not clamped: a count below 0 stays over-committed until enough comes back (Redisson's
-- scripts add what comes back to it too).
local left = rate - used;
redis.call('set', value_key, left);
rate_keep(value_key, permits_key, keep_alive);
redis.call(ARGV[4], KEYS[6], 'rate');
return math.max(left, 0);
