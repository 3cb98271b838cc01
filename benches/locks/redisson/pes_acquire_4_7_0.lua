-- The reference, not used by redlatch: Redisson 4.7.0's script as its Java sends it
-- (redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java, lines 382 to
-- 411, `tryAcquireAsync(List<String>, long)`, at the tag redisson-4.7.0), its string literals
-- joined.
-- KEYS[1] semaphore name, KEYS[2] {name}:timeout, KEYS[3] redisson_sc:{name}
-- ARGV[1] permits, ARGV[2] the permits' deadline ms, ARGV[3] the client's time ms, ARGV[4] the
-- no-expiry deadline (922337203685477), ARGV[5] publish command, ARGV[6..] permit ids (16 bytes)
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); local value = redis.call('incrby', KEYS[1], #expiredIds); if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end;end; local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then redis.call('decrby', KEYS[1], ARGV[1]); for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; local ttl = redis.call('pttl', KEYS[1]); if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; return 'OK'; end; local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]); end return nil;
