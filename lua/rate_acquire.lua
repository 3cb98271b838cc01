-- Take permits from a rate limiter if the last interval leaves enough (Redisson's
-- RedissonRateLimiter.tryAcquireAsync, on the server's clock, recounting where its count
-- cannot be right: see lua/rate_common.lua).
-- KEYS[1]  config "name" (HASH)
-- KEYS[2]  permits left "{name}:value"
-- KEYS[3]  this client's permits left "{name}:value:<client id>"
-- KEYS[4]  permits taken "{name}:permits" (ZSET)
-- KEYS[5]  this client's permits taken "{name}:permits:<client id>"
--          (all as lua/rate_common.lua says)
-- ARGV[1]  permits (>= 1)
-- ARGV[2]  this call's random id (16 bytes, as Redisson 3.21 and later): the ZSET member is
--          struct.pack('Bc0I', #id, id, permits), so a call sent again after its reply was
--          lost finds its entry and takes nothing twice
-- ARGV[3]  "1" where this id was sent before (its entry is looked for), "0" on its first
--          call (a ZSCORE saved: a third of what the server clock costs)
-- Reply:   <ms>             taken: the server's time of the taking, as the entry's score
--                           says (also for a call sent again): an integer > 0
--          {-<ms>, left}    refused: the permits are back in that many ms, and the permits
--                           left now (for the other waiters they may serve); nothing changed
--                           (an integer reply, for the common case, costs the server less
--                           than an array)
--          error NORATE     no complete config (nothing changed)
--          error OVERRATE   more permits than the rate (nothing changed)
local rate, interval, type, keep_alive = rate_config();
if rate == nil then
    return not_set();
end;
local value_key, permits_key = rate_keys(type);
local n = tonumber(ARGV[1]);
local member = struct.pack('Bc0I', string.len(ARGV[2]), ARGV[2], n);
if ARGV[3] == '1' then
    local taken_at = redis.call('zscore', permits_key, member);
    if taken_at then
        return tonumber(taken_at);
    end;
end;
if n > rate then
    return redis.error_reply('OVERRATE ' .. n .. ' permits asked of a rate of ' .. rate);
end;
local now = clock_ms();
local left, expired = rate_left(rate, interval, value_key, permits_key, now, type);
if left < n then
    return {-rate_wait(interval, permits_key, now, n - left), math.max(left, 0)};
end;
if expired then
    redis.call('zremrangebyscore', permits_key, '-inf', now - interval);
end;
-- NX: a first call run after its resend (it cannot be told apart otherwise) takes nothing.
if redis.call('zadd', permits_key, 'NX', now, member) == 0 then
    return tonumber(redis.call('zscore', permits_key, member));
end;
redis.call('set', value_key, left - n);
rate_keep(value_key, permits_key, keep_alive);
return now;
