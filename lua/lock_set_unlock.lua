-- Release one hold of each of many plain locks (one hash slot's names of a lock set), for one
-- owner. A name's last hold is released as lock_unlock.lua releases it (key deleted, "0"
-- published on its channel); when that publish reached a subscriber (a waiter), the yield
-- key is set to this owner for ARGV[4] ms, and lock_set_acquire.lua will not give this owner
-- the name back meanwhile: the woken waiter gets its turn.
-- KEYS[3i-2]  lock name i (HASH: owner -> hold count)
-- KEYS[3i-1]  its channel "redisson_lock__channel:{name}"
-- KEYS[3i]    its yield key "redlatch_lockset_yield:{name}"
-- ARGV[1]     lease in milliseconds, applied again where holds remain
-- ARGV[2]     owner id
-- ARGV[3]     publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[4]     how long the owner yields a freed name a waiter listens on, in ms (0: never)
-- Reply:      array of n integers, for name i:
--             1   last hold released: key deleted, "0" published
--             2   one hold released, the owner still holds the name (its count was > 1)
--             0   the owner holds no hold of the name (nothing changed)
--             error WRONGTYPE  a name exists and is not a hash (names before it released)
local res = {};
for i = 1, #KEYS / 3 do
    local name = KEYS[3 * i - 2];
    local count = redis.call('hget', name, ARGV[2]);
    if count == false then
        res[i] = 0;
    elseif tonumber(count) > 1 then
        redis.call('hincrby', name, ARGV[2], -1);
        redis.call('pexpire', name, ARGV[1]);
        res[i] = 2;
    else
        redis.call('del', name);
        local heard = redis.call(ARGV[3], KEYS[3 * i - 1], '0');
        if heard > 0 and tonumber(ARGV[4]) > 0 then
            redis.call('set', KEYS[3 * i], ARGV[2], 'px', ARGV[4]);
        end;
        res[i] = 1;
    end;
end;
return res;
