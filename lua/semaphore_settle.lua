-- Settle an acquire whose reply was lost: give back what its receipt says it took (ours), if
-- the semaphore is still the generation it was taken from.
-- KEYS[1]  semaphore name (STRING: available permits)
-- KEYS[2]  the acquire's receipt "<permits taken>:<left>:<generation>" (see
--          lua/semaphore_acquire.lua)
-- KEYS[3]  channel "redisson_sc:{name}"
-- KEYS[4]  generation "redlatch_semaphore:{name}"
-- ARGV[1]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- Reply:   integer             the permits given back (the new count published on KEYS[3]);
--                              0 when there is no receipt: the acquire took nothing, or has
--                              not run; minus the permits taken when the semaphore is no
--                              longer their generation (nothing given back; the receipt is
--                              deleted)
--          error WRONGTYPE     the key is not a string holding an integer (nothing changed)
local receipt = redis.call('get', KEYS[2]);
if receipt == false then
    return 0;
end;
local taken, generation = string.match(receipt, '^(%d+):%-?%d+:(.*)$');
taken = tonumber(taken or receipt);
local value = redis.call('get', KEYS[1]);
if value ~= false and tonumber(value) == nil then
    return redis.error_reply('WRONGTYPE semaphore value is not an integer');
end;
redis.call('del', KEYS[2]);
if generation ~= nil and redis.call('get', KEYS[4]) ~= generation then
    return -taken;
end;
local count = redis.call('incrby', KEYS[1], taken);
redis.call(ARGV[1], KEYS[3], count);
return taken;
