-- The end of a condition wait: the owner holds the lock again (one hold, just acquired) and
-- gets back the hold count it had before the wait.
-- KEYS[1]  lock name (HASH: field -> hold count)
-- ARGV[1]  the owner's hash field in KEYS[1]
-- ARGV[2]  the hold count to restore
-- Reply:   1   restored; or the count is ARGV[2] already (the call sent again after its
--              reply was lost: nothing changed)
--          0   the owner's hold is neither the single one just acquired nor ARGV[2] holds
--              (nothing changed)
local held = redis.call('hget', KEYS[1], ARGV[1]);
if held == ARGV[2] then
    return 1;
end;
if held ~= '1' then
    return 0;
end;
redis.call('hset', KEYS[1], ARGV[1], ARGV[2]);
return 1;
