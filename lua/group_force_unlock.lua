-- Free a group lock's values whoever holds them: Redisson's
-- RedissonFasterMultiLock.forceUnlockAsync (RedissonFasterMultiLock.java, lines 549-569). Only
-- these values: the group's others stay held.
-- KEYS[1]  group (HASH, see group_acquire.lua)
-- KEYS[2]  lock channel "redisson_lock__channel:{group}"
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[2..] the value fields
-- Reply:   1 if any of the values was held (its fields deleted), else 0; "0" is published
--          on KEYS[2] either way
--          error WRONGTYPE  the key exists and is not a hash
local removed = 0;
for i = 2, #ARGV do
    local holder = redis.call('hget', KEYS[1], ARGV[i]);
    if holder ~= false then
        removed = removed + redis.call('hdel', KEYS[1], ARGV[i],
            ARGV[i] .. ':' .. holder .. ':expire_time', ARGV[i] .. ':' .. holder .. ':lock_count');
    end;
end;
redis.call(ARGV[1], KEYS[2], '0');
if removed > 0 then
    return 1;
end;
return 0;
