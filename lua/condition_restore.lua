-- The end of a condition wait: the owner holds the lock again (one hold, just acquired) and
-- gets back the hold count it had before the wait.
-- KEYS[1]  lock name (HASH: field -> hold count)
-- ARGV[1]  the owner's hash field in KEYS[1]
-- ARGV[2]  the hold count to restore
-- Reply:   1   restored
--          0   the owner's hold is not the single one just acquired (nothing changed)
if redis.call('hget', KEYS[1], ARGV[1]) ~= '1' then
    return 0;
end;
redis.call('hset', KEYS[1], ARGV[1], ARGV[2]);
return 1;
