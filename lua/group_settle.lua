-- Give back one hold of a group lock's values that an acquire whose reply was lost took:
-- only where every value of the acquire's set is held by the owner more times than the
-- client's guards account for (the holds of every set of the owner's that names it). An
-- acquire takes all of its values or none, so a set with one value not held beyond those
-- holds was not taken by it, and nothing is released: the owner's other holds of the same
-- values are never touched. Ours only (Redisson has no settle); the release itself is
-- group_unlock.lua's, without a latch.
-- KEYS[1]  group (HASH, see group_acquire.lua)
-- KEYS[2]  lock channel "redisson_lock__channel:{group}"
-- ARGV[1]  lease in milliseconds, applied again to values still held
-- ARGV[2]  owner id
-- ARGV[3]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[4..] pairs: a value field of the acquire, and the holds of it the client's guards have
-- Reply:   1  one hold of each value given back ("0" published if a value was freed)
--          0  nothing changed: some value is not held beyond the guards' holds
--          error WRONGTYPE  the key exists and is not a hash
if redis.call('exists', KEYS[1]) == 0 then
    return 0;
end;
local now = clock_ms();
local lease = tonumber(ARGV[1]);
local owner = ARGV[2];
for i = 4, #ARGV, 2 do
    local held = ARGV[i] .. ':' .. owner;
    if redis.call('hget', KEYS[1], ARGV[i]) ~= owner then
        return 0;
    end;
    local expire = tonumber(redis.call('hget', KEYS[1], held .. ':expire_time'));
    local count = tonumber(redis.call('hget', KEYS[1], held .. ':lock_count'));
    if expire == nil or expire < now or count == nil or count <= tonumber(ARGV[i + 1]) then
        return 0;
    end;
end;
local freed = false;
for i = 4, #ARGV, 2 do
    local held = ARGV[i] .. ':' .. owner;
    if redis.call('hincrby', KEYS[1], held .. ':lock_count', -1) <= 0 then
        redis.call('hdel', KEYS[1], held .. ':expire_time', held .. ':lock_count', ARGV[i]);
        freed = true;
    elseif tonumber(redis.call('hget', KEYS[1], held .. ':expire_time')) < now + lease then
        redis.call('hset', KEYS[1], held .. ':expire_time', now + lease);
    end;
end;
if freed then
    redis.call(ARGV[3], KEYS[2], '0');
end;
return 1;
