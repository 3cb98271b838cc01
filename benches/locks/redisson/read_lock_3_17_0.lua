-- The reference, not used by redlatch: Redisson 3.17.0's script as its Java sends it
-- (redisson/src/main/java/org/redisson/RedissonReadLock.java, lines 59 to 79, at the tag
-- redisson-3.17.0), its string literals joined.
-- KEYS[1] lock name, KEYS[2] {name}:<owner>:rwlock_timeout
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] <owner>:write
local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'read'); redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('set', KEYS[2] .. ':1', 1); redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); local key = KEYS[2] .. ':' .. ind;redis.call('set', key, 1); redis.call('pexpire', key, ARGV[1]); local remainTime = redis.call('pttl', KEYS[1]); redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end;return redis.call('pttl', KEYS[1]);
