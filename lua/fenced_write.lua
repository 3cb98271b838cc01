-- Write (or delete) a fenced value: only a token not older than the newest one the value has
-- seen gets through, and a token already used is accepted from the same holder only (see
-- fence_common.lua, prepended).
-- KEYS[1]  the value (STRING `name`)
-- KEYS[2]  its fence "redlatch_fence:{name}" (HASH: token -> newest token, holder -> who used it)
-- ARGV[1]  the writer's fencing token (decimal, > 0)
-- ARGV[2]  the writer's holder id (the lock owner id)
-- ARGV[3]  "set" or "del"
-- ARGV[4]  the new value (for "set")
-- Reply:   {1, previous}  written (or deleted); previous = the newest token before (0 if none)
--          {0, newest}    rejected: newest > token, or newest == token used by another
--                         holder (a token handed out twice, after a failover lost its increment)
--          error WRONGTYPE  a key holds another type (checked before anything is written)
local verdict = fence_claim(KEYS[1], KEYS[2], ARGV[1], ARGV[2]);
if verdict[1] ~= 1 then
    return verdict;
end;
if ARGV[3] == 'del' then
    redis.call('del', KEYS[1]);
else
    redis.call('set', KEYS[1], ARGV[4]);
end;
return verdict;
