-- Release one permit by id (RedissonPermitExpirableSemaphore.tryReleaseAsync).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}": the new permit count is published on it
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2]  permit id
-- Reply:   1                   released: ZREM id, count incremented and published
--          0                   no such permit: never acquired, released already, or expired
--                              (nothing changed beyond the reclaim)
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53): checked before anything is written
-- lua/pes_common.lua runs first: it checks the key types and reclaims expired permits
-- (defining `now` and `count`), as Redisson's scripts reclaim first.
if redis.call('zrem', KEYS[2], ARGV[2]) == 0 then
    return 0;
end;
count = redis.call('incrby', KEYS[1], 1);
redis.call(ARGV[1], KEYS[3], int(count));
return 1;
