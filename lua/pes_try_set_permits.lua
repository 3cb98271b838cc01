-- Set the number of permits of a permit-expirable semaphore if it has none yet
-- (RedissonPermitExpirableSemaphore.trySetPermitsAsync).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}": the new permit count is published on it
-- KEYS[4]  receipt "redisson_unlock_latch:{name}:<client uuid>-<n>": this call's, set to 1
--          for ARGV[3] ms when it set the count
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2]  permits (decimal, >= 0)
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   1                   the count was absent: set to ARGV[2], ARGV[2] published; or
--                              KEYS[4] is set: this call was made before (its reply was
--                              lost), nothing changed beyond the reclaim
--          0                   the count exists (nothing changed beyond the reclaim)
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53): checked before anything is written
-- lua/pes_check.lua and lua/pes_common.lua run first: they check the key types and reclaim
-- expired permits (defining `now` and `count`), as Redisson's scripts reclaim first.
if redis.call('exists', KEYS[4]) == 1 then
    return 1;
end;
if redis.call('exists', KEYS[1]) == 1 then
    return 0;
end;
redis.call('set', KEYS[1], ARGV[2]);
redis.call(ARGV[1], KEYS[3], ARGV[2]);
redis.call('set', KEYS[4], 1, 'px', ARGV[3]);
return 1;
