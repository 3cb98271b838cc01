-- Give a held permit a new lease from now (RedissonPermitExpirableSemaphore.updateLeaseTimeAsync).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}": the new permit count is published on it
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2]  permit id
-- ARGV[3]  lease in milliseconds
-- Reply:   1                   the permit expires now + lease; if that is earlier than before,
--                              the count is published so that waiters re-read the earliest
--                              expiry they wait for (a count <= 0 wakes one waiter per client)
--          0                   no such permit: never acquired, released already, or expired
--                              (nothing changed beyond the reclaim)
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53): checked before anything is written
-- lua/pes_check.lua and lua/pes_common.lua run first: they check the key types and reclaim
-- expired permits (defining `now` and `count`), as Redisson's scripts reclaim first.
local before = redis.call('zscore', KEYS[2], ARGV[2]);
if before == false then
    return 0;
end;
local expires = now + tonumber(ARGV[3]);
redis.call('zadd', KEYS[2], int(expires), ARGV[2]);
if expires < tonumber(before) then
    redis.call(ARGV[1], KEYS[3], int(count));
end;
return 1;
