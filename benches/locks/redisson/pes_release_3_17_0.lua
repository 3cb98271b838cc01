-- The reference, not used by redlatch: Redisson 3.17.0's script as its Java sends it
-- (redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java, lines 564 to
-- 576, `tryReleaseAsync(String)`, at the tag redisson-3.17.0), its string literals joined.
-- KEYS[1] semaphore name, KEYS[2] redisson_sc:{name}, KEYS[3] {name}:timeout
-- ARGV[1] permit id, ARGV[2] permits (1), ARGV[3] the client's time ms
local expire = redis.call('zscore', KEYS[3], ARGV[1]);local removed = redis.call('zrem', KEYS[3], ARGV[1]);if tonumber(removed) ~= 1 then return 0;end;local value = redis.call('incrby', KEYS[1], ARGV[2]); redis.call('publish', KEYS[2], value); if tonumber(expire) <= tonumber(ARGV[3]) then return 0;end;return 1;
