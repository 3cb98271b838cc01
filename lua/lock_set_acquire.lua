-- Take many plain locks (one hash slot's names of a lock set) all or none, for one owner.
-- Each name is an ordinary reentrant lock, as lock_acquire.lua takes it; a name whose yield
-- key (see lock_set_unlock.lua) carries this owner is refused while that key lives, so that
-- a set which just freed the name for a waiter does not take it back before that waiter can.
-- KEYS[2i-1]  lock name i (HASH: owner -> hold count)
-- KEYS[2i]    its yield key "redlatch_lockset_yield:{name}" (a string: the owner that yields)
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     owner id "<client uuid>:<thread number>"
-- Reply:      {0, count_1, ..., count_n}  every name taken (or re-entered): the owner's count
--                                          of name i is count_i, PEXPIRE lease on each
--             {i, pttl, 0}                 nothing taken: name i is held by another owner,
--                                          for pttl ms more (-1 if it has no expiry)
--             {i, pttl, 1}                 nothing taken: this owner yields name i for pttl
--                                          ms more (a waiter was woken by its release)
--             error WRONGTYPE              a name exists and is not a hash
local n = #KEYS / 2;
for i = 1, n do
    local name = KEYS[2 * i - 1];
    if redis.call('exists', name) == 1 and redis.call('hexists', name, ARGV[2]) == 0 then
        return {i, redis.call('pttl', name), 0};
    end;
    if redis.call('get', KEYS[2 * i]) == ARGV[2] then
        return {i, redis.call('pttl', KEYS[2 * i]), 1};
    end;
end;
local res = {0};
for i = 1, n do
    local name = KEYS[2 * i - 1];
    res[i + 1] = redis.call('hincrby', name, ARGV[2], 1);
    redis.call('pexpire', name, ARGV[1]);
end;
return res;
