-- Settle an acquire whose reply was lost: give back what its receipt says it took (ours).
-- KEYS[1]  semaphore name (STRING: available permits)
-- KEYS[2]  the acquire's receipt (see lua/semaphore_acquire.lua)
-- KEYS[3]  channel "redisson_sc:{name}"
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- Reply:   integer             the permits given back (the new count published on KEYS[3]);
--                              0 when there is no receipt: the acquire took nothing, or has
--                              not run
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local taken = redis.call('get', KEYS[2]);
if taken == false then
    return 0;
end;
local value = redis.call('get', KEYS[1]);
if value ~= false and tonumber(value) == nil then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
redis.call('del', KEYS[2]);
local count = redis.call('incrby', KEYS[1], taken);
redis.call(ARGV[1], KEYS[3], count);
return tonumber(taken);
