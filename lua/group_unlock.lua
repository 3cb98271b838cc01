-- Release one hold of a group lock's values: Redisson's RedissonFasterMultiLock.unlockInnerAsync
-- (RedissonFasterMultiLock.java, lines 470-531), on the server's clock. Each value the owner
-- holds (its expire_time not passed) counts one hold less; at 0 its three fields go. As in
-- Redisson, a value the owner no longer holds does not stop the others' release. One
-- difference: "0" is published when a value was freed (Redisson publishes after every release,
-- its test `if (hasDeleted)` being true for 0 in Lua).
-- KEYS[1]  group (HASH, see group_acquire.lua)
-- KEYS[2]  lock channel "redisson_lock__channel:{group}"
-- KEYS[3]  unlock latch: makes a retried call idempotent
-- ARGV[1]  lease in milliseconds, applied again to values still held
-- ARGV[2]  owner id
-- ARGV[3]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[4]  unlock latch TTL in milliseconds
-- ARGV[5..] the value fields
-- Reply:   nil  the owner did not hold every value (those it held were released; no latch)
--          0    released one hold, the owner still holds the values (latch "0")
--          1    released the last hold of every value (latch "1")
--          the latch's value, when KEYS[3] exists (a retried call)
--          error WRONGTYPE  the key exists and is not a hash
local latched = redis.call('get', KEYS[3]);
if latched ~= false then
    return tonumber(latched);
end;
if redis.call('exists', KEYS[1]) == 0 then
    redis.call(ARGV[3], KEYS[2], '0');
    return nil;
end;
local now = clock_ms();
local lease = tonumber(ARGV[1]);
local owner = ARGV[2];
local failed, all_freed, freed = false, 1, false;
for i = 5, #ARGV do
    local held = ARGV[i] .. ':' .. owner;
    -- Expiry and count in one read: the last hold's field goes without a decrement first.
    local fields = redis.call('hmget', KEYS[1], held .. ':expire_time', held .. ':lock_count');
    local expire = tonumber(fields[1]);
    if expire ~= nil and expire >= now then
        local last = (tonumber(fields[2]) or 0) <= 1;
        if last or redis.call('hincrby', KEYS[1], held .. ':lock_count', -1) <= 0 then
            redis.call('hdel', KEYS[1], held .. ':expire_time', held .. ':lock_count', ARGV[i]);
            freed = true;
        else
            if expire < now + lease then
                redis.call('hset', KEYS[1], held .. ':expire_time', now + lease);
            end;
            all_freed = 0;
        end;
    else
        all_freed = 0;
        failed = true;
    end;
end;
if freed then
    redis.call(ARGV[3], KEYS[2], '0');
end;
if failed then
    return nil;
end;
redis.call('set', KEYS[3], all_freed, 'px', ARGV[4]);
if all_freed == 0 and lease > redis.call('pttl', KEYS[1]) then
    redis.call('pexpire', KEYS[1], lease);
end;
return all_freed;
