-- The reference, not used by redlatch: Redisson 3.17.0's script as its Java sends it
-- (redisson/src/main/java/org/redisson/RedissonWriteLock.java, lines 56 to 73, at the tag
-- redisson-3.17.0), its string literals joined.
-- KEYS[1] lock name
-- ARGV[1] lease ms, ARGV[2] <owner>:write
local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); local currentExpire = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end;return redis.call('pttl', KEYS[1]);
