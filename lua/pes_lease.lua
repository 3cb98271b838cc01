-- Read the remaining lease of one permit without writing
-- (RedissonPermitExpirableSemaphore.getLeaseTimeAsync).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}" (unused)
-- ARGV[1]  publish command (unused)
-- ARGV[2]  permit id
-- Reply:   ms >= 1             the permit expires in that many ms
--          -1                  the permit never expires (a score >= 922337203685477, or below 0,
--                              which no reclaim takes: Redisson's permanent permits)
--          -2                  no such permit: never acquired, released, or its expiry has come
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53)
-- lua/pes_check.lua runs first (and writes nothing): it checks the key types (defining `now`).
-- The timeout set's type is checked here, by its first read (see lua/pes_check.lua).
local score = redis.pcall('zscore', KEYS[2], ARGV[2]);
if type(score) == 'table' then
    return redis.error_reply('WRONGTYPE the permit timeout key is not a sorted set');
end;
if score == false then
    return -2;
end;
score = tonumber(score);
if score < 0 or score >= 922337203685477 then
    return -1;
end;
if score <= now then
    return -2;
end;
return math.ceil(score - now);
