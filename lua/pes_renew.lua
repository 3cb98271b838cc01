-- Renew the leases of many permits of permit-expirable semaphores in one call (the watchdog's
-- batch for renewed permit guards).
-- KEYS[i]      "{name}:timeout" of semaphore i: ZSET permit id (its 16 bytes) -> expiry in ms on the server clock
-- ARGV[1]      lease in milliseconds
-- ARGV[i+1]    permit id for semaphore i
-- Reply:       array of one integer per permit: 1 = the permit is still taken (in KEYS[i], not
--              yet expired): its expiry is now server time + lease (ZADD XX), or it has no lease
--              (Redisson's score 922337203685477 and above: left as it is); 0 = it is not
--              (released, expired, reclaimed or removed, or KEYS[i] is not a sorted set):
--              nothing is written for it, its renewal stops and its guard is marked lost
-- Nothing is reclaimed or published: a later expiry wakes nobody, and waiters re-read the
-- earliest expiry when their bound (the old one) ends.
local now = clock_ms();
local expires = string.format('%d', now + tonumber(ARGV[1]));
local res = {};
for i, key in ipairs(KEYS) do
    -- pcall: a foreign key reports 0 for its permit, not an error for the whole batch.
    local score = redis.pcall('zscore', key, ARGV[i + 1]);
    res[i] = 0;
    local at = type(score) == 'string' and tonumber(score) or nil;
    if at ~= nil and at >= 922337203685477 then
        -- Redisson's "no lease": taken for good, left so (not turned into an expiring permit).
        res[i] = 1;
    elseif at ~= nil and at > now then
        redis.call('zadd', key, 'XX', expires, ARGV[i + 1]);
        res[i] = 1;
    end;
end;
return res;
