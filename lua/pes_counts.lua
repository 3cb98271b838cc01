-- Count the permits without writing (RedissonPermitExpirableSemaphore.acquiredPermitsAsync and
-- getPermitsAsync, which reclaim first: here expired permits are counted as available instead).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}" (unused)
-- ARGV[1]  publish command (unused)
-- Reply:   {available, acquired, exists}
--                              available: the count plus the permits whose expiry has come
--                              (what the next call will reclaim); acquired: the permits whose
--                              expiry is still to come (scores above now, as Redisson's
--                              ZCOUNT 0 +inf after its reclaim); exists: 1 if the count key
--                              exists, else 0
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53)
-- lua/pes_check.lua runs first (and writes nothing): it checks the key types (defining `now`
-- and `count`).
-- The timeout set's type is checked here, by its first read (see lua/pes_check.lua).
local expired = redis.pcall('zcount', KEYS[2], 0, int(now));
if type(expired) == 'table' then
    return redis.error_reply('WRONGTYPE the permit timeout key is not a sorted set');
end;
local acquired = redis.call('zcount', KEYS[2], '(' .. int(now), '+inf');
return {count + expired, acquired, redis.call('exists', KEYS[1])};
