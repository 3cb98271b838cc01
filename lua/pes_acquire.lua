-- Take n permits with one lease, all or none (RedissonPermitExpirableSemaphore.tryAcquireAsync).
-- KEYS[1]  name: STRING, the available permits (decimal)
-- KEYS[2]  "{name}:timeout": ZSET permit id (its 16 bytes) -> expiry in ms on the server clock (>= 922337203685477: never)
-- KEYS[3]  channel "redisson_sc:{name}": the new permit count is published on it
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  n, how many permits (>= 1)
-- ARGV[4..3+n] the n permit ids (distinct; each the 16 bytes its 32 hex characters stand for,
--          as Redisson sends them); any arguments after them are a gate's
--          (lua/pes_priority_gate.lua)
-- Reply:   {1, left}           acquired: count decremented by n, ZADD now + lease -> each id;
--                              left = count after
--          {0, count, wait}    not acquired (nothing written beyond the reclaim): count (< n)
--                              and the ms until the earliest permit expires (>= 1), or -1 if
--                              none will (no permit held, or only scores >= 922337203685477 or
--                              below 0)
--          error WRONGTYPE     a key holds another type, or the count is not an integer
--                              (|n| < 2^53): checked before anything is written
-- lua/pes_check.lua and lua/pes_common.lua run first: they check the key types and reclaim
-- expired permits (defining `now` and `count`), as Redisson's scripts reclaim first.
local n = tonumber(ARGV[3]);
if count >= n then
    count = redis.call('decrby', KEYS[1], n);
    local expires = int(now + tonumber(ARGV[2]));
    for i = 4, 3 + n do
        redis.call('zadd', KEYS[2], expires, ARGV[i]);
    end;
    return {1, count};
end;
local wait = -1;
-- The earliest expiry still to come (scores below 0 are never reclaimed, as in Redisson).
local first = redis.call('zrangebyscore', KEYS[2], '(' .. int(now), '+inf', 'withscores', 'limit', 0, 1);
if first[2] ~= nil and tonumber(first[2]) < 922337203685477 then
    wait = math.ceil(tonumber(first[2]) - now);
end;
return {0, count, wait};
