-- Release permits by id (RedissonPermitExpirableSemaphore.tryReleaseAsync, one id or a list).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}": the new permit count is published on it
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2..] permit ids (one or more)
-- Reply:   n >= 1              released n of them (the others are no permits): ZREM each,
--                              count incremented by n and published
--          0                   none is a permit: never acquired, released already, or expired
--                              (nothing changed beyond the reclaim)
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53): checked before anything is written
-- lua/pes_check.lua and lua/pes_common.lua run first: they check the key types and reclaim
-- expired permits (defining `now` and `count`), as Redisson's scripts reclaim first.
local released = 0;
for i = 2, #ARGV do
    released = released + redis.call('zrem', KEYS[2], ARGV[i]);
end;
if released == 0 then
    return 0;
end;
count = redis.call('incrby', KEYS[1], released);
redis.call(ARGV[1], KEYS[3], int(count));
return released;
