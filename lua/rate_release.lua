-- Give permits back to a rate limiter: the newest entries taken in the last interval shrink
-- by that many permits (removed where none is left), and the count grows by as many, so
-- that they come back once, not again when their entries expire (Redisson 4's release
-- raises only the count). Sent once: a call tried again after a lost reply finds its receipt.
-- KEYS[1]  config "name" (HASH)
-- KEYS[2]  permits left "{name}:value"
-- KEYS[3]  this client's permits left "{name}:value:<client id>"
-- KEYS[4]  permits taken "{name}:permits" (ZSET)
-- KEYS[5]  this client's permits taken "{name}:permits:<client id>"
--          (all as lua/rate_common.lua says)
-- KEYS[6]  the limiter's channel "redlatch_rate:{name}" (see src/keys.rs)
-- KEYS[7]  this call's receipt "redisson_unlock_latch:{name}:<client uuid>-<n>"
-- ARGV[1]  permits to give back (>= 1)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   given   the permits given back (fewer than asked where the interval holds
--                  fewer taken); the count after it is published on KEYS[6] where both
--                  are > 0
--          error NORATE   no complete config (nothing changed)
local made = redis.call('get', KEYS[7]);
if made then
    return tonumber(made);
end;
local rate, interval, type, keep_alive = rate_config();
if rate == nil then
    return not_set();
end;
local value_key, permits_key = rate_keys(type);
local now = clock_ms();
local left, expired = rate_left(rate, interval, value_key, permits_key, now, type);
if expired then
    redis.call('zremrangebyscore', permits_key, '-inf', now - interval);
end;
local want = tonumber(ARGV[1]);
local given = 0;
local newest = redis.call('zrevrangebyscore', permits_key, '+inf', '(' .. (now - interval),
    'WITHSCORES', 'LIMIT', 0, want);
for i = 1, #newest, 2 do
    if given >= want then
        break;
    end;
    local member = newest[i];
    local ok, random, n = pcall(struct.unpack, 'Bc0I', member);
    if ok and n and n > 0 then
        local take = math.min(n, want - given);
        redis.call('zrem', permits_key, member);
        if take < n then
            redis.call('zadd', permits_key, newest[i + 1],
                struct.pack('Bc0I', string.len(random), random, n - take));
        end;
        given = given + take;
    end;
end;
left = math.min(left + given, rate);
redis.call('set', value_key, left);
rate_keep(value_key, permits_key, keep_alive);
if given > 0 and left > 0 then
    redis.call(ARGV[2], KEYS[6], left);
end;
redis.call('set', KEYS[7], given, 'px', ARGV[3]);
return given;
