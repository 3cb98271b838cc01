-- Add (or, with a negative delta, remove) permits (RedissonPermitExpirableSemaphore.addPermitsAsync).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}": the new permit count is published on it
-- KEYS[4]  receipt "redisson_unlock_latch:{name}:<client uuid>-<n>": this call's, set to the
--          new count for ARGV[3] ms
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2]  delta (decimal, may be negative)
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   integer             the new count, which is published; for a call whose receipt
--                              is set (made again after its reply was lost), the first
--                              call's, and nothing changed beyond the reclaim
--          error ERR           the new count would leave the range |n| < 2^53 (nothing changed)
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53): checked before anything is written
-- lua/pes_check.lua and lua/pes_common.lua run first: they check the key types and reclaim
-- expired permits (defining `now` and `count`), as Redisson's scripts reclaim first.
local done = redis.call('get', KEYS[4]);
if done ~= false then
    return tonumber(done);
end;
local sum = count + tonumber(ARGV[2]);
if math.abs(sum) >= 2 ^ 53 then
    return redis.error_reply('ERR the permit count would leave the range of +-2^53');
end;
count = redis.call('incrby', KEYS[1], ARGV[2]);
redis.call(ARGV[1], KEYS[3], int(count));
redis.call('set', KEYS[4], int(count), 'px', ARGV[3]);
return count;
