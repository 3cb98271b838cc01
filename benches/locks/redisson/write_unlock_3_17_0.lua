-- The reference, not used by redlatch: Redisson 3.17.0's script as its Java sends it
-- (redisson/src/main/java/org/redisson/RedissonWriteLock.java, lines 79 to 108, at the tag
-- redisson-3.17.0), its string literals joined.
-- KEYS[1] lock name, KEYS[2] redisson_rwlock:{name}
-- ARGV[1] message 1, ARGV[2] lease ms, ARGV[3] <owner>:write
local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end;if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); if (lockExists == 0) then return nil;else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('hdel', KEYS[1], ARGV[3]); if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); else redis.call('hset', KEYS[1], 'mode', 'read'); end; return 1; end; end; end; return nil;
