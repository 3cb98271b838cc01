-- Whether any of a group lock's values is held: Redisson's RedissonFasterMultiLock.isLockedAsync
-- (RedissonFasterMultiLock.java, lines 755-772), on the server's clock.
-- KEYS[1]  group (HASH, see group_acquire.lua)
-- ARGV[1..] the value fields
-- Reply:   1 if a value names an owner whose expire_time has not passed, else 0
--          error WRONGTYPE  the key exists and is not a hash
local now = clock_ms();
for i = 1, #ARGV do
    local holder = redis.call('hget', KEYS[1], ARGV[i]);
    if holder ~= false then
        local expire = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':expire_time'));
        if expire ~= nil and expire >= now then
            return 1;
        end;
    end;
end;
return 0;
